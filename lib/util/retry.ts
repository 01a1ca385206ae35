/**
 * A pause before retry number `attempt` (from 0): `baseMs · 2^attempt`, capped at `maxMs`, then
 * scaled by a random 50–100 %, so a fleet that failed together does not retry in step.
 */
export function jitteredPause(attempt: number, baseMs: number, maxMs: number): number {
  return Math.round(Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 30)) * (0.5 + Math.random() / 2));
}

/**
 * Retries `attempt` after jittered pauses (0.5 s doubling up to `maxPauseMs`) until it succeeds
 * or `stopped()` says to give up; each failure is logged through `log` as `describe(error)`.
 * Never throws: for work a process keeps trying in the background (e.g. while Redis is away).
 * Resolves true if `attempt` succeeded.
 */
export async function retryInBackground(
  attempt: () => Promise<void>,
  options: { stopped: () => boolean; log: { warn(message: string): void }; describe: (error: Error) => string; maxPauseMs: number },
): Promise<boolean> {
  for (let n = 0; !options.stopped(); n++) {
    await new Promise((resolve) => setTimeout(resolve, jitteredPause(n, 500, options.maxPauseMs)).unref());
    if (options.stopped()) return false;
    try {
      await attempt();
      return !options.stopped(); // stopped meanwhile (e.g. the app closed): do not start anything
    } catch (error) {
      options.log.warn(options.describe(error as Error));
    }
  }
  return false;
}
