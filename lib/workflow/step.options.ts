import { InvalidOptionError } from '../errors';
import { checkInteger } from '../util/duration';
import { BACKOFF_OPTIONS, type BackoffOptions } from '../interfaces/backoff.options';
import { checkOptionKeys } from '../util/option-keys';

/** Longest time limit or backoff delay: what one `setTimeout` can wait (2^31 − 1 ms, about 24.8 days). */
export const MAX_TIMER_MS = 2_147_483_647;
/** Most tries of one step, as for a workflow's attempts. */
export const MAX_STEP_ATTEMPTS = 1_000;

/**
 * Backoff between the tries of a step with `attempts` and no `backoff`: 1 s doubling, at most
 * 30 s. Shorter than the workflows' default (up to an hour) on purpose: a step waits for its next
 * try in place, holding the run's slots, where a failed run waits in Redis holding nothing.
 */
export const DEFAULT_STEP_BACKOFF: Required<BackoffOptions> = { delayMs: 1_000, factor: 2, maxDelayMs: 30_000 };

/**
 * How one step executes: its time limit and its tries. The third argument of `ctx.step`, and
 * part of `@Step(options)`. Every field is optional; a step without them runs once, unbounded,
 * at no cost.
 *
 * Ignored for a nested step (one called inside another step's `fn`): a nested step is part of
 * its parent, so the parent's limit and tries govern it — a retry of the parent runs it again,
 * and the parent's limit bounds it. (The options are still validated.)
 */
export interface StepCallOptions {
  /**
   * Time limit of each try, in ms (1 to 2^31 − 1). When it runs out the step's signal aborts
   * with a `TimeoutError` and the try counts as a failure; once the step has no tries left, the
   * run attempt fails at once with that `TimeoutError` and `ctx.signal` aborts. The timed-out
   * code is not stopped (JavaScript cannot stop a promise): it keeps running in the background
   * and its result is ignored, so long work should watch the signal it is given.
   */
  timeoutMs?: number;
  /**
   * Tries of the step within one run attempt (1 to 1000; default 1: a failure fails the run
   * attempt). A failed try is retried in place after the backoff, without replaying the steps
   * before it and without giving up the run's slots (the lease heartbeat keeps them).
   * Not retried: `NonRetryableError` (so `StepMemoLimitError`), `InvalidInputError`,
   * `LeaseLostError`, and any failure once the run's signal has aborted.
   */
  attempts?: number;
  /**
   * Delay between tries: `delayMs × factor^(tries − 1)`, capped at `maxDelayMs`, ±20 % jitter.
   * Default: 1 s doubling, at most 30 s; a given `backoff` without `maxDelayMs` is capped at 30 s
   * (or at its `delayMs`, if larger). Each delay is at most 2^31 − 1 ms. The wait ends early if the
   * run's signal aborts (the step then fails with its last error).
   */
  backoff?: BackoffOptions;
}

/** The keys of {@link StepCallOptions}. */
export const STEP_CALL_OPTIONS: readonly string[] = ['timeoutMs', 'attempts', 'backoff'];

/** What a step's `fn` receives (it may ignore it: `() => value` still works). */
export interface StepContext {
  /**
   * This step's own signal: aborted with a `TimeoutError` when this try runs past the step's
   * `timeoutMs`, and with the run's reason when `ctx.signal` aborts. A nested step gets its
   * parent's. Made only when read, so a step that never looks costs nothing.
   */
  readonly signal: AbortSignal;
  /** The try of this step within the run attempt: 1, then 2… up to the step's `attempts`. */
  readonly attempt: number;
}

/** A step's function: it may take the {@link StepContext}. */
export type StepFn<T> = (step: StepContext) => Promise<T> | T;

/** Validated {@link StepCallOptions}, defaults filled in. */
export interface ResolvedStepOptions {
  timeoutMs?: number;
  attempts: number;
  backoff: Required<BackoffOptions>;
}

/**
 * Validates step options; `undefined` (nothing to do: the step runs once, plainly) when none
 * is set. `field` names the options in errors, e.g. `ctx.step("charge") options`.
 * @throws InvalidOptionError
 */
export function resolveStepOptions(options: StepCallOptions | undefined, field: string): ResolvedStepOptions | undefined {
  if (options === undefined) return undefined;
  if (options === null || typeof options !== 'object')
    throw new InvalidOptionError(field, 'must be an object { timeoutMs?, attempts?, backoff? }');
  checkOptionKeys(options, STEP_CALL_OPTIONS, field);
  const { timeoutMs, attempts, backoff } = options;
  if (timeoutMs === undefined && attempts === undefined && backoff === undefined) return undefined;
  if (timeoutMs !== undefined) checkInteger(timeoutMs, `${field}.timeoutMs`, 1, MAX_TIMER_MS);
  if (attempts !== undefined) checkInteger(attempts, `${field}.attempts`, 1, MAX_STEP_ATTEMPTS);
  return {
    timeoutMs,
    attempts: attempts ?? 1,
    backoff: backoff === undefined ? DEFAULT_STEP_BACKOFF : checkStepBackoff(backoff, `${field}.backoff`),
  };
}

function checkStepBackoff(backoff: BackoffOptions, field: string): Required<BackoffOptions> {
  if (backoff === null || typeof backoff !== 'object')
    throw new InvalidOptionError(field, 'must be an object { delayMs, factor?, maxDelayMs? }');
  checkOptionKeys(backoff, BACKOFF_OPTIONS, field);
  const delayMs = checkInteger(backoff.delayMs, `${field}.delayMs`, 0, MAX_TIMER_MS);
  const maxDelayMs =
    backoff.maxDelayMs === undefined
      ? Math.max(delayMs, DEFAULT_STEP_BACKOFF.maxDelayMs)
      : checkInteger(backoff.maxDelayMs, `${field}.maxDelayMs`, 0, MAX_TIMER_MS);
  const factor = backoff.factor ?? DEFAULT_STEP_BACKOFF.factor;
  if (typeof factor !== 'number' || !Number.isFinite(factor) || factor <= 0)
    throw new InvalidOptionError(`${field}.factor`, `must be a number > 0, got ${String(factor)}`);
  return { delayMs, factor, maxDelayMs };
}
