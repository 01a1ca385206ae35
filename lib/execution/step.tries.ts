import { TimeoutError } from '../errors';
import type { ResolvedStepOptions, StepContext } from '../workflow/step.options';
import type { AttemptGuard, RunAbort } from './attempt.guard';
import { backoffDelay, stepRetryable } from './retry.policy';

/**
 * Executes one step's `fn` (through `invoke`, which gives it its context) under its options:
 * each try bounded by `timeoutMs`, failed tries retried in place after the backoff. Without
 * options, one plain call whose context carries the run's signal.
 *
 * When the last try fails on its time limit, the whole attempt is ended through the guard
 * (`ctx.signal` aborts, the attempt fails at once), even if the caller catches the error.
 */
export function runStepTries<T>(
  key: string,
  options: ResolvedStepOptions | undefined,
  guard: AttemptGuard,
  invoke: (step: StepContext) => Promise<T> | T,
): Promise<T> | T {
  // Without options (most steps): the call itself, no promise of its own. Its caller awaits it,
  // so a synchronous throw is handled as a rejection would be.
  if (!options) return invoke(new SignalContext(guard.abort, 1));
  return runTries(key, options, guard, invoke);
}

async function runTries<T>(
  key: string,
  options: ResolvedStepOptions,
  guard: AttemptGuard,
  invoke: (step: StepContext) => Promise<T> | T,
): Promise<T> {
  let lastError: unknown;
  for (let attempt = 1; ; attempt++) {
    const stepAbort = new StepAbort(guard.abort);
    try {
      const running = invoke(stepAbort.context(attempt));
      if (options.timeoutMs === undefined) return await running;
      const limitMs = options.timeoutMs;
      return await withinLimit(running, limitMs, () => {
        const error = new TimeoutError(guard.runId, limitMs, key);
        stepAbort.abort(error);
        return error;
      });
    } catch (error) {
      lastError = error;
    } finally {
      stepAbort.release();
    }
    if (attempt >= options.attempts || guard.abort.aborted || !stepRetryable(lastError)) break;
    await guard.sleep(backoffDelay(options.backoff, attempt, guard.random), guard.abort);
    if (guard.abort.aborted) break;
  }
  if (lastError instanceof TimeoutError && lastError.step === key && lastError.runId === guard.runId) guard.expire(lastError);
  throw lastError;
}

/** Settles as `running` does, or rejects with `expire()`'s error after `ms`; `running` is left to run on, unobserved. */
function withinLimit<T>(running: Promise<T> | T, ms: number, expire: () => TimeoutError): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(expire()), ms);
    timer.unref(); // a try abandoned with its attempt must not keep the process alive
    Promise.resolve(running).then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/**
 * A step's context, its signal read from `source` when asked for (the run's abort, or the try's
 * {@link StepAbort}). A class: an object literal with a getter is a dictionary-mode object,
 * several times as costly to make, once per step.
 */
class SignalContext implements StepContext {
  readonly #source: { readonly signal: AbortSignal };

  constructor(
    source: { readonly signal: AbortSignal },
    readonly attempt: number,
  ) {
    this.#source = source;
  }

  get signal(): AbortSignal {
    return this.#source.signal;
  }
}

/**
 * One try's signal, made only when read: aborted by the try's time limit, or with the run's
 * reason when the run's signal aborts (it listens to the run's signal only while the try runs).
 */
class StepAbort {
  private controller?: AbortController;
  private aborted = false;
  private why: unknown;
  private released = false;
  private unlink?: () => void;

  constructor(private readonly run: RunAbort) {}

  context(attempt: number): StepContext {
    return new SignalContext(this, attempt);
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.why);
      else if (this.run.aborted) this.abort(this.run.reason);
      else if (!this.released) {
        const runSignal = this.run.signal;
        const onAbort = () => this.abort(runSignal.reason);
        runSignal.addEventListener('abort', onAbort, { once: true });
        this.unlink = () => runSignal.removeEventListener('abort', onAbort);
      }
    }
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.why = reason;
    this.controller?.abort(reason);
    this.release();
  }

  /** The try is over: stop listening to the run's signal (a long run must not collect listeners). */
  release(): void {
    this.released = true;
    this.unlink?.();
    this.unlink = undefined;
  }
}
