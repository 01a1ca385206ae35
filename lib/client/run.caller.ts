import type { WorkflowRegistry } from '../discovery/workflow.registry';
import type { InboxEnqueueReply, RunWaiter } from './run.waiter';

/** What `run()` hands over: the run's id, its enqueue (not yet sent), and the wait's options. */
export interface RunCall {
  runId: string;
  /**
   * Sends the enqueue, naming who waits on the run (its 'waited' field: '1' for its done
   * channel, or an inbox id); resolves once Redis acknowledged it.
   */
  enqueue: (waitedBy: string) => Promise<InboxEnqueueReply>;
  timeoutMs?: number;
  onProgress?: (value: unknown) => void;
}

/**
 * Whether `run()` may overlap its enqueue with its subscribe. Only when this process declares the
 * workflow without retention by count: its finished runs then stay until `resultTtlMs`, so the
 * read that follows both finds a run that finished before the subscription was live. Any other
 * case may have its record deleted by the very call that announces it (`keep: { completed: 0 }`),
 * and a process that does not declare the workflow (by name, by contract, or a decorated class
 * that is not its provider) cannot know: there the subscription must be live first.
 */
export function mayOverlapEnqueue(registry: WorkflowRegistry, workflow: string): boolean {
  if (!registry.has(workflow)) return false;
  const keep = registry.get(workflow).keep;
  return keep?.completed === undefined && keep?.failed === undefined;
}

/**
 * Enqueues and waits: on this process's inbox when it is live and no progress is asked for (the
 * enqueue is then the only call), else on the run's done channel. Once the enqueue was
 * acknowledged, whatever the wait rejects with names the run (`error.runId`), so that a caller
 * retrying does not start a second run: it can `wait` for this one, or enqueue again with its
 * id. A wait that fails while the enqueue is still in flight waits for the enqueue to settle (it
 * is bounded by `redisTimeoutMs`) to know which it is; if the enqueue failed, its error is the
 * one reported (an `OutcomeUnknownError` names the run already).
 */
export async function enqueueAndWait(waiter: RunWaiter, call: RunCall, overlap: boolean): Promise<unknown> {
  let enqueued: Promise<unknown> | undefined;
  try {
    if (!call.onProgress && waiter.inboxReady()) {
      return await waiter.waitOnInbox(call.runId, call.timeoutMs, (inbox) => (enqueued = call.enqueue(inbox)));
    }
    const enqueue = () => (enqueued = call.enqueue('1'));
    return await waiter.wait(call.runId, call.timeoutMs, overlap ? enqueue() : enqueue, call.onProgress);
  } catch (error) {
    if (enqueued === undefined) throw error; // the subscribe failed first: nothing was sent
    throw await enqueued.then(
      () => nameRun(error, call.runId),
      (enqueueError: unknown) => enqueueError,
    );
  }
}

/** Stamps the run's id on an error that does not name it yet (an error instance is the caller's own). */
function nameRun(error: unknown, runId: string): unknown {
  if (error instanceof Error && (error as { runId?: unknown }).runId === undefined) (error as { runId?: string }).runId = runId;
  return error;
}
