import { ChildWorkflowFailedError, InvalidInputError, LeaseLostError, NonRetryableError, UnknownWorkflowError } from '../errors';
import type { BackoffOptions } from '../interfaces/backoff.options';

/**
 * Whether a failed attempt earns the run another one (attempts left permitting). Not when the code
 * said so (`NonRetryableError`), nor for bad input, nor for a child's failure the code did not
 * catch: that outcome is in the run's memo, so every further attempt would replay the same failure
 * (re-drive it with `retry` once the child is fixed: see lua/retry.lua). An unknown workflow is
 * retried: its worker (a child's, enqueued by contract during a deploy) may not have booted yet.
 * The worker and the testing harness decide alike.
 */
export function attemptRetryable(error: unknown): boolean {
  if (error instanceof UnknownWorkflowError) return true;
  return !(error instanceof NonRetryableError || error instanceof InvalidInputError || error instanceof ChildWorkflowFailedError);
}

/**
 * Whether a run whose `failures`-th failure was `retryable` gets another attempt: what
 * lua/fail.lua decides in a worker (against the run's stored count), and the harness in memory.
 */
export function attemptsLeft(retryable: boolean, failures: number, maxAttempts: number): boolean {
  return retryable && failures < maxAttempts;
}

/** Failures a step's retry in place could fix: the rule for runs, plus a lost lease (nothing to retry for). */
export function stepRetryable(error: unknown): boolean {
  if (error instanceof UnknownWorkflowError) return true; // a child's worker not booted yet, as for runs
  return !(error instanceof NonRetryableError || error instanceof InvalidInputError || error instanceof LeaseLostError);
}

/**
 * Delay before the attempt after the `failures`-th failure: exponential, capped, with ±20 %
 * jitter so runs that failed together (an outage) do not retry in lockstep.
 */
export function backoffDelay(backoff: Required<BackoffOptions>, failures: number, random = Math.random): number {
  const exponential = backoff.delayMs * Math.pow(backoff.factor, Math.max(0, failures - 1));
  const capped = Math.min(backoff.maxDelayMs, exponential);
  return Math.round(capped * (0.8 + 0.4 * random()));
}
