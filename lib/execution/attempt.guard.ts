import { TimeoutError } from '../errors';

/** The run attempt's abort, as the guard and steps use it ({@link LazyAbort} is one). */
export interface RunAbort {
  readonly signal: AbortSignal;
  readonly reason: unknown;
  readonly aborted: boolean;
  abort(reason: unknown): void;
}

/** Waits `ms` before a step's next try; must resolve early once `abort` is aborted. */
export type StepSleep = (ms: number, abort: RunAbort) => Promise<void>;

/**
 * The time limits of one run attempt. {@link settle} waits for the workflow's `run` — but no
 * longer than the run's limit, nor past a step's final timeout ({@link expire}): then it rejects
 * with the `TimeoutError` at once, after aborting `ctx.signal` with it, so the attempt is failed
 * and its slots freed without waiting for code that ignores its signal. That code carries on in
 * the background; its later writes are refused by the lease token.
 *
 * A timer exists only while a limit applies: an attempt without one pays for one promise.
 */
export class AttemptGuard {
  private timer?: NodeJS.Timeout;
  private reject?: (error: unknown) => void;
  private resolve?: (value: unknown) => void;
  private expired?: Error;
  /** Set once the attempt's outcome is decided: late calls of abandoned code (progress) write nothing. */
  ended = false;

  constructor(
    readonly runId: string,
    readonly abort: RunAbort,
    /** How a step waits between tries: a real timer in a worker, the fake clock in the harness. */
    readonly sleep: StepSleep = sleepUnlessAborted,
    /** The backoff jitter's source. */
    readonly random: () => number = Math.random,
  ) {}

  /** Whether the attempt was ended by {@link expire}: a body that is a plain value must still go through {@link settle}, which rejects. */
  get over(): boolean {
    return this.expired !== undefined;
  }

  /**
   * Resolves or rejects as `body` does, unless `limitMs` passes first or {@link expire} is
   * called: then it rejects with that `TimeoutError` and leaves `body` to run on, unobserved.
   */
  settle<T>(body: T | PromiseLike<T>, limitMs?: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.expired) {
        // Ended before the body was handed over (a NonDeterminismError on the run's first call,
        // made synchronously): the body's own rejection is observed here, or it would be unhandled.
        Promise.resolve(body).catch(() => undefined);
        return reject(this.expired);
      }
      this.reject = reject;
      this.resolve = resolve as (value: unknown) => void;
      if (limitMs !== undefined) this.timer = setTimeout(() => this.expire(new TimeoutError(this.runId, limitMs)), limitMs);
      Promise.resolve(body).then(
        (value) => {
          clearTimeout(this.timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(this.timer);
          reject(error);
        },
      );
    });
  }

  /**
   * The attempt ended another way (its run suspended in a durable wait): {@link settle} resolves
   * with `value` at once, its time limit no longer applies, and the body, which never settles, is
   * left unobserved. First outcome wins, as with {@link expire}.
   */
  release(value: unknown): void {
    clearTimeout(this.timer);
    this.resolve?.(value);
  }

  /**
   * Ends the attempt with `error` (a `TimeoutError`, or the `RunCancelledError` of a cancel):
   * `ctx.signal` aborts with it and {@link settle} rejects with it. First call wins.
   */
  expire(error: Error): void {
    if (this.expired) return;
    this.expired = error;
    clearTimeout(this.timer);
    this.abort.abort(error);
    this.reject?.(error);
  }
}

/** The longest delay a Node timer keeps. */
const MAX_TIMER_MS = 2_147_483_647;

/** A real wait, ended early when the run's signal aborts. */
export function sleepUnlessAborted(ms: number, abort: RunAbort): Promise<void> {
  if (ms <= 0 || abort.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const signal = abort.signal;
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    // Node fires a longer timer after 1 ms: the jitter can take a capped backoff past its maximum.
    const timer = setTimeout(done, Math.min(ms, MAX_TIMER_MS));
    signal.addEventListener('abort', done, { once: true });
  });
}
