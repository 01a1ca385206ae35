import { InvalidOptionError } from '../errors';
import { CLIENT_ENQUEUE_OPTIONS } from '../interfaces/enqueue.options';
import { checkInteger } from '../util/duration';

/** Options of `QueueClient.wait` (and of `run`, beside the enqueue's). */
export interface WaitOptions {
  /** Give up after this many ms with `WaitTimeoutError` (the run carries on). Default: no limit. */
  timeoutMs?: number;
  /**
   * Called with the run's progress values (`ctx.progress`): first the stored one, if any, then
   * each one the worker writes, in order, never twice and never after the wait settled. Values
   * may be skipped (the worker writes at most one every 250 ms, and a value published while the
   * subscriber reconnects is caught up by the next read only if it is still the latest). What it
   * throws is ignored. Without it, the wait subscribes to nothing more than the run's outcome.
   */
  onProgress?: (value: unknown) => void;
}

/** The keys of {@link WaitOptions}; `run()` takes them besides the enqueue's. */
export const WAIT_OPTIONS: readonly string[] = ['timeoutMs', 'onProgress'];
export const RUN_OPTIONS: readonly string[] = [...CLIENT_ENQUEUE_OPTIONS, ...WAIT_OPTIONS];

/** Checks the values of {@link WaitOptions} (their keys are checked with the enqueue's, or alone). */
export function checkWaitValues(opts: WaitOptions | undefined): void {
  if (opts?.timeoutMs !== undefined) checkInteger(opts.timeoutMs, 'opts.timeoutMs', 0, 2_147_483_647);
  const onProgress: unknown = opts?.onProgress;
  if (onProgress !== undefined && typeof onProgress !== 'function')
    throw new InvalidOptionError('opts.onProgress', `must be a function, got ${typeof onProgress}`);
}
