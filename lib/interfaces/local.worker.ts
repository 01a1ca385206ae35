/**
 * This process's worker, as its client sees it: an enqueue that Redis handed to a parked worker
 * answers with the run's lease token and the worker's id (see lua/enqueue.lua). The enqueue names
 * this worker, and a handoff to it is not published on its handoff channel: the client starts the
 * run in it from the reply, a pub/sub hop sooner, and the only copy. Should the reply be lost,
 * nothing starts the run: its lease lapses and the stalled scan makes it due again.
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
