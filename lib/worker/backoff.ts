import type { BackoffOptions } from '../workflow/workflow.types';

/**
 * Delay before the attempt after the `failures`-th failure: exponential, capped, with ±20 %
 * jitter so runs that failed together (an outage) do not retry in lockstep.
 */
export function backoffDelay(backoff: Required<BackoffOptions>, failures: number, random = Math.random): number {
  const exponential = backoff.delayMs * Math.pow(backoff.factor, Math.max(0, failures - 1));
  const capped = Math.min(backoff.maxDelayMs, exponential);
  return Math.round(capped * (0.8 + 0.4 * random()));
}
