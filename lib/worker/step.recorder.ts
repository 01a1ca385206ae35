import { LeaseLostError, StepMemoLimitError } from '../errors';
import { decodePayload, encodePayload } from '../redis/payload.codec';
import { checkId } from '../util/names';
import { stepScope, type StepRunner } from '../workflow/run.scope';
import type { Jsonified } from '../workflow/json.roundtrip';
import { resolveStepOptions, type ResolvedStepOptions, type StepCallOptions, type StepFn } from '../workflow/step.options';
import type { StepObserver } from '../telemetry/step.observer';
import { LazyAbort } from './active-runs';
import { AttemptGuard } from './attempt.guard';
import { runStepTries } from './step.tries';

/** Persists one step result under the run's lease; resolves false if the lease is gone. */
export type PersistStep = (key: string, encoded: string) => Promise<boolean>;

/**
 * Default bound on one run's whole step memo (keys plus encoded results). The memo is shipped
 * with every claim of the run, so without a bound a step in a loop could grow every retry's
 * reply without limit.
 */
export const DEFAULT_MAX_MEMO_BYTES = 16 * 1024 * 1024;

/**
 * Memoizes the steps of one run attempt. A step's key is its name plus its occurrence in this
 * attempt (`charge#1`, `charge#2`…), so a step called in a loop memoizes each call. Reads come
 * from the memo shipped with the claim; each executed step costs one token-checked write, done
 * before the step returns. A step called inside another step's `fn` is not a step of its own:
 * it runs plainly and its effect is covered by the parent's memo entry — its options (time
 * limit, tries) are ignored, the parent's govern it, and its `fn` gets the parent's context.
 */
export class StepRecorder implements StepRunner {
  private readonly occurrences = new Map<string, number>();
  /** Bytes of the memo as persisted so far, including writes in flight (reserved before the write). */
  private memoBytes: number;

  constructor(
    private readonly runId: string,
    private readonly memo: Map<string, string>,
    private readonly persist: PersistStep,
    private readonly maxPayloadBytes: number,
    private readonly maxMemoBytes: number = DEFAULT_MAX_MEMO_BYTES,
    /** The attempt's telemetry (spans for executed steps, events for replays); only with it on. */
    private readonly observer?: StepObserver,
    /** The attempt's signal and time limits (step timeouts end the attempt through it). */
    private readonly guard: AttemptGuard = new AttemptGuard(runId, new LazyAbort()),
  ) {
    this.memoBytes = 0;
    for (const [key, value] of memo) this.memoBytes += entryBytes(key, value);
  }

  async step<T>(name: string, fn: StepFn<T>, options?: StepCallOptions): Promise<Jsonified<T>> {
    checkId(name, 'step name');
    if (typeof fn !== 'function') throw new TypeError(`ctx.step("${name}", fn): fn must be a function`);
    const resolved = resolveStepOptions(options, `ctx.step("${name}") options`);
    // Nested in another step of this run: part of the parent. Numbering it would make the
    // occurrence numbers depend on whether the parent executed or was replayed; its own limit
    // and tries would multiply the parent's. (Typed as the round trip although returned as is:
    // a call site cannot know it is nested.)
    const frame = stepScope.getStore();
    if (frame?.runner === this) return fn(frame.context) as unknown as Jsonified<T>;

    const occurrence = (this.occurrences.get(name) ?? 0) + 1;
    this.occurrences.set(name, occurrence);
    const key = `${name}#${occurrence}`;
    const saved = this.memo.get(key);
    if (saved !== undefined) {
      this.observer?.replayed(name, key);
      return decodePayload<Jsonified<T>>(saved);
    }
    // An attempt that is over (time limit, cancel, lost lease, shutdown) starts no new side effect,
    // even when its code ignored its signal and carries on in the background.
    if (this.guard.abort.aborted) throw this.guard.abort.reason;
    if (this.observer) return this.observer.executed(name, key, () => this.execute(key, fn, resolved));
    return this.execute(key, fn, resolved);
  }

  /** Executes a step (its tries, see runStepTries) and persists its result before handing it back. */
  private async execute<T>(key: string, fn: StepFn<T>, options: ResolvedStepOptions | undefined): Promise<Jsonified<T>> {
    const value = await runStepTries(key, options, this.guard, (context) => stepScope.run({ runner: this, context }, fn, context));
    const encoded = encodePayload(value, `step "${key}" result`, this.maxPayloadBytes);
    await this.save(key, encoded);
    // Hand back the decoded copy, so the first attempt sees exactly what a replay would.
    return decodePayload<Jsonified<T>>(encoded);
  }

  /** Writes one memo entry within the run's memo budget, or throws having written nothing. */
  private async save(key: string, encoded: string): Promise<void> {
    const bytes = entryBytes(key, encoded);
    if (this.memoBytes + bytes > this.maxMemoBytes) {
      throw new StepMemoLimitError(this.runId, key, bytes, this.memoBytes + bytes, this.maxMemoBytes);
    }
    // Reserve before awaiting the write, so steps running in parallel can't together overshoot.
    // A write that throws stays counted: it may have landed before the error reached us.
    this.memoBytes += bytes;
    if (!(await this.persist(key, encoded))) {
      this.memoBytes -= bytes;
      throw new LeaseLostError(this.runId);
    }
    this.memo.set(key, encoded);
  }
}

/** One memo entry's share of the budget: what it adds to the claim reply that ships the memo. */
function entryBytes(key: string, encoded: string): number {
  return Buffer.byteLength(key) + Buffer.byteLength(encoded);
}
