import { NonDeterminismError } from '../errors';

/** A recorded top-level call: its kind and its position. */
interface Recorded {
  kind: string;
  position: number;
}

/**
 * Checks, call by call, that a replay follows the run's recorded calls (memo fields `@<position>`
 * → `<kind>:<name>#<occurrence>`, written with each step's result and with each wait). It flags a
 * changed workflow, not a reordered one: calls started side by side may reach the recorder in
 * another order on a replay (one branch awaited other I/O first), and a branch whose step failed
 * left no record. So a call is a `NonDeterminismError` when
 * - its key was recorded as another kind (a wait turned into a step, or back);
 * - it is a recorded wait, and a call recorded before it was not made in this attempt first (a
 *   step removed before the wait) — every call before a wait had settled when the wait was
 *   committed, so a replay that reaches the wait has made them all;
 * - it is new, at a position where the run recorded another call, before a recorded wait (a step
 *   renamed or inserted before the wait). Past the last recorded wait nothing is checked: the run
 *   never went on from there, and what it recorded there may be any branch's.
 * Memo entries written before positions were recorded (older versions) are not checked.
 */
export class DeterminismGuard {
  private readonly recorded = new Map<string, Recorded>();
  private readonly byPosition: string[] = [];
  /** The highest position of a recorded wait, or -1. */
  private lastWait = -1;
  private readonly called = new Set<string>();

  constructor(
    private readonly runId: string,
    memo: ReadonlyMap<string, string>,
  ) {
    for (const [field, value] of memo) {
      if (!field.startsWith('@')) continue;
      const position = Number(field.slice(1));
      const colon = value.indexOf(':');
      const kind = value.slice(0, colon);
      const key = value.slice(colon + 1);
      this.recorded.set(key, { kind, position });
      this.byPosition[position] = value;
      if (kind !== 'step' && position > this.lastWait) this.lastWait = position;
    }
  }

  /** Throws the `NonDeterminismError` (see the class comment) for the call `<kind>:<key>` made at `position`. */
  check(kind: string, key: string, position: number): void {
    const called = `${kind}:${key}`;
    const recorded = this.recorded.get(key);
    if (recorded) {
      if (recorded.kind !== kind) throw this.error(recorded.position, called);
      if (kind !== 'step') {
        for (let earlier = 0; earlier < recorded.position; earlier++) {
          const value = this.byPosition[earlier];
          if (value !== undefined && !this.called.has(value.slice(value.indexOf(':') + 1))) throw this.error(earlier, called);
        }
      }
    } else if (position < this.lastWait && this.byPosition[position] !== undefined) {
      throw this.error(position, called);
    }
    this.called.add(key);
  }

  private error(position: number, called: string): NonDeterminismError {
    return new NonDeterminismError(this.runId, position, this.byPosition[position] ?? '(nothing)', called);
  }
}
