import type { DedupeRequest } from '../interfaces/dedupe.options';
import type { EnqueueRequest } from '../interfaces/enqueue.options';
import type { DedupeReply } from '../redis/commands/enqueue-dedupe.command';
import type { RunEnqueuer } from './run.enqueuer';
import type { RunHandle } from './run.handle';
import type { WaitOptions } from './wait.options';

/** Waits for a run by id (QueueClient.wait). */
type Wait = (runId: string, opts?: WaitOptions) => Promise<unknown>;

/** The handle of an enqueue with a dedupe: on the window's run, saying what the window made of the call. */
export function dedupedHandle<T>(reply: DedupeReply, dedupe: DedupeRequest, wait: Wait): RunHandle<T> {
  const { runId, outcome, seq } = reply;
  return {
    id: runId,
    created: outcome === 'created',
    dedupe: { outcome, key: dedupe.key, mode: dedupe.mode, seq },
    result: (opts) => wait(runId, opts) as Promise<T>,
  };
}

/**
 * `run()` with a dedupe: the enqueue first, as only its reply names the run (the window's, maybe
 * another caller's), then a wait on that run; every caller folded into one run gets its outcome.
 * Two round trips, where a plain `run()` takes one: the wait marks the run waited on (lua/watch.lua)
 * and reads its stored outcome, so a run that finished in between is still found. Whatever the
 * wait rejects with names the run (`error.runId`).
 */
export async function runDeduped(
  enqueuer: RunEnqueuer,
  request: EnqueueRequest,
  dedupe: DedupeRequest,
  wait: Wait,
  opts?: WaitOptions,
): Promise<unknown> {
  const { runId } = await enqueuer.storeDeduped(request, dedupe);
  try {
    return await wait(runId, { timeoutMs: opts?.timeoutMs, onProgress: opts?.onProgress });
  } catch (error) {
    if (error instanceof Error && (error as { runId?: unknown }).runId === undefined) (error as { runId?: string }).runId = runId;
    throw error;
  }
}
