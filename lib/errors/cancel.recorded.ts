import { RunCancelledError, type RunErrorInfo } from './run.errors';

/**
 * The `RunCancelledError` of a cancelled run, from the error its record holds: lua/cancel.lua
 * stores the reason given to `cancel` there. Its waiters and the worker's lease heartbeat (when it
 * sees the cancel before the cancel channel's message) build the same error from it.
 */
export function cancelledRunError(runId: string, recorded: RunErrorInfo | undefined): RunCancelledError {
  const reason = recorded?.reason;
  return new RunCancelledError(runId, typeof reason === 'string' && reason !== '' ? reason : undefined);
}
