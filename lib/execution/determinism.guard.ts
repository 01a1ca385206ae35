import { NonDeterminismError } from '../errors';

/** A recorded top-level call: its kind and its position. */
interface Recorded {
  kind: string;
  position: number;
}

/**
 * Checks, call by call, that a replay follows the run's recorded calls (memo fields `@<position>`
 * → `<kind>:<name>#<occurrence>`, written with each wait for every call before it). It flags a
 * changed workflow, not a reordered one or one that took another branch: calls started side by
 * side may reach the recorder in another order on a replay (one branch awaited other I/O first),
 * and a step that failed and was caught runs again on the replay, where it may succeed and send
 * the code down another path. So a call is a `NonDeterminismError` only when
 * - its key was recorded as another kind (a wait turned into a step, or back);
 * - it is new, at a position where the run recorded another call, before the last wait the run
 *   passed (a step renamed or inserted before it), or at that wait's own position if it is a wait
 *   too (the wait renamed: its outcome, delivered under the old name, would be lost).
 * A recorded call that the replay does not make (a step removed, a branch not taken) is not
 * flagged: what it did stays done. Each check is O(1). Memo entries written before positions were
 * recorded (older versions) are not checked.
 */
export class DeterminismGuard {
  private readonly recorded = new Map<string, Recorded>();
  private readonly byPosition: string[] = [];
  /** The highest position of a recorded wait, or -1. */
  private lastWait = -1;

  constructor(
    private readonly runId: string,
    memo: ReadonlyMap<string, string>,
  ) {
    for (const [field, value] of memo) {
      if (!field.startsWith('@')) continue;
      const position = Number(field.slice(1));
      const colon = value.indexOf(':');
      const kind = value.slice(0, colon);
      this.recorded.set(value.slice(colon + 1), { kind, position });
      this.byPosition[position] = value;
      if (kind !== 'step' && position > this.lastWait) this.lastWait = position;
    }
  }

  /** Throws the `NonDeterminismError` (see the class comment) for the call `<kind>:<key>` made at `position`. */
  check(kind: string, key: string, position: number): void {
    const recorded = this.recorded.get(key);
    if (recorded) {
      if (recorded.kind !== kind) throw this.error(recorded.position, `${kind}:${key}`);
      return;
    }
    if (this.byPosition[position] === undefined) return;
    if (position < this.lastWait || (position === this.lastWait && kind !== 'step')) throw this.error(position, `${kind}:${key}`);
  }

  private error(position: number, called: string): NonDeterminismError {
    return new NonDeterminismError(this.runId, position, this.byPosition[position] ?? '(nothing)', called);
  }
}
