import { SluiceError } from './sluice.error';

/**
 * Thrown by workflow code to fail the run at once, without the remaining retries
 * (e.g. a validation failure that no retry can fix).
 */
export class NonRetryableError extends SluiceError {}

/** How a failed run's cause is stored in Redis and handed to waiters. */
export interface RunErrorInfo {
  name: string;
  message: string;
  stack?: string;
}

/**
 * `wait`/`run`/`result` on a run that failed for good. The message includes the cause's message;
 * `causeName` and `causeStack` carry the rest of what the worker recorded.
 */
export class WorkflowFailedError extends SluiceError {
  readonly causeName: string;
  readonly causeMessage: string;
  readonly causeStack?: string;

  constructor(
    readonly runId: string,
    readonly workflow: string | undefined,
    cause: RunErrorInfo,
  ) {
    super(`Run ${runId}${workflow ? ` of workflow "${workflow}"` : ''} failed: ${cause.name}: ${cause.message}`);
    this.causeName = cause.name;
    this.causeMessage = cause.message;
    this.causeStack = cause.stack;
  }
}

/** `wait` gave up after `timeoutMs`; the run itself carries on. */
export class WaitTimeoutError extends SluiceError {
  constructor(
    readonly runId: string,
    readonly timeoutMs: number,
  ) {
    super(`Run ${runId} did not finish within ${timeoutMs} ms`);
  }
}

/** `wait` on a run id that does not exist (never enqueued, or its result retention expired). */
export class RunNotFoundError extends SluiceError {
  constructor(readonly runId: string) {
    super(`Run ${runId} does not exist (never enqueued, or its result expired after resultTtlMs)`);
  }
}

/**
 * Raised inside a run when this worker no longer holds the run's lease (it stalled and another
 * worker took the run over). The stale worker's writes are refused; the new owner carries on.
 */
export class LeaseLostError extends SluiceError {
  constructor(readonly runId: string) {
    super(`Lease on run ${runId} was lost; another worker owns it now`);
  }
}

/**
 * A step's result would take the run's step memo (every persisted key and result, shipped with
 * each claim of the run) over its byte budget; nothing was written. It is a
 * {@link NonRetryableError} rather than an `InvalidInputError` because it is not a bad argument
 * caught before any write but a property of the run itself: a retry replays the same steps up to
 * the same point, executes this step again and hits the same limit, so the run fails for good at
 * once. Typical cause: a step called in an unbounded loop, or large step results (store the data
 * elsewhere and return a reference).
 */
export class StepMemoLimitError extends NonRetryableError {
  constructor(
    readonly runId: string,
    /** The step's memo key, `name#occurrence`. */
    readonly stepKey: string,
    /** What this step's entry (key plus encoded result) would add. */
    readonly stepBytes: number,
    /** The memo's size with this entry. */
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(
      `Run ${runId}: the result of step "${stepKey}" (${stepBytes} bytes) would bring the run's step memo to ${bytes} bytes, over the limit of ${limit} bytes (maxRunMemoBytes)`,
    );
  }
}
