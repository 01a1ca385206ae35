/**
 * This process's worker, as its client sees it: an enqueue that Redis handed to a parked worker
 * over its handoff channel answers with the run's lease token and the worker's id (see
 * lua/enqueue.lua); when the worker is this process's own, the client starts the run in it at
 * once, from the reply, a pub/sub hop sooner than the published handoff, which the worker then
 * takes as the second copy of the same handoff.
 *
 * Implemented by the WorkerOrchestrator; handed to the client by the composition root (the worker
 * and the client never import each other).
 */
export interface LocalWorker {
  /** The worker's id in the parked sets, named by the handoffs made to it. */
  readonly workerId: string;
  /** Starts a run an enqueue of this process handed to this worker: its first attempt, with an empty memo. */
  handoff(workflow: string, token: string, runId: string, input: string): void;
}
