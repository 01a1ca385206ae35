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
