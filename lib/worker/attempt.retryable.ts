import { ChildWorkflowFailedError, InvalidInputError, NonRetryableError, UnknownWorkflowError } from '../errors';

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
