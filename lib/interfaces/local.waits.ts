/**
 * This process's own `run()` waits, as its worker sees them: a complete call names their inbox
 * (so Redis does not announce there the runs the call finishes; see lua/complete.lua), and the
 * worker tells them itself, from the call's reply. Within one process this saves the pub/sub hop
 * from the commit to the waiter: the announcement Redis would write to the process's subscriber
 * connection, and the read of it.
 *
 * Implemented by the client's RunInbox; handed to the worker by the composition root (the worker
 * and the client never import each other).
 */
export interface LocalWaits {
  /** The inbox id named in a run's 'waited' field by this process's `run()` calls. */
  readonly id: string;
  /** The run was committed as completed with this encoded result ('' = undefined). */
  completed(runId: string, workflow: string, encoded: string): void;
  /** A complete call's outcome is unknown (its reply was lost): these runs' waits read their records again. */
  unsure(runIds: readonly string[]): void;
}
