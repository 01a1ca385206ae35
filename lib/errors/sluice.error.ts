/** Base class of every error Sluice throws, so callers can catch the whole family at once. */
export class SluiceError extends Error {
  /**
   * The run the error concerns, when there is one. Every error `QueueClient.run()` rejects with
   * once its enqueue was acknowledged carries it (a `WaitTimeoutError`, a `RedisConnectionError`
   * of the wait, the shutdown's `SluiceError`, `WorkflowFailedError`…), as does an
   * `OutcomeUnknownError` of an enqueue, with the id that call used (also a generated one): the
   * run may exist, so `wait(runId)` for it, or enqueue again with `{ id: runId }` (idempotent),
   * rather than start a second run. Absent where nothing was written.
   */
  declare runId?: string;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
