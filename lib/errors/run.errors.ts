import { SluiceError } from './sluice.error';

/**
 * Thrown by workflow code to fail the run at once, without the remaining retries
 * (e.g. a validation failure that no retry can fix).
 */
export class NonRetryableError extends SluiceError {}

/** How a failed run's cause is stored in Redis and handed to waiters. */
export interface RunErrorInfo {
  /** The error's class name (`error.name`), e.g. `TypeError`; `RunCancelledError` for a cancelled run. */
  name: string;
  /** The error's message. */
  message: string;
  /** The error's stack, when it had one. */
  stack?: string;
  /** A cancelled run's: the reason given to `cancel`, if any. */
  reason?: string;
}

/**
 * `wait`/`run`/`result` on a run that failed for good. The message includes the cause's message;
 * `causeName` and `causeStack` carry the rest of what the worker recorded.
 */
export class WorkflowFailedError extends SluiceError {
  /** The class name of the error the run failed with (`RunErrorInfo.name`). */
  readonly causeName: string;
  /** The message of the error the run failed with. */
  readonly causeMessage: string;
  /** The stack of the error the run failed with, as the worker recorded it; absent if it had none. */
  readonly causeStack?: string;

  constructor(
    /** The run that failed. */
    override readonly runId: string,
    /** Its workflow's name, when known to the caller. */
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
    /** The run waited for. */
    override readonly runId: string,
    /** The wait's bound, in ms. */
    readonly timeoutMs: number,
  ) {
    super(`Run ${runId} did not finish within ${timeoutMs} ms`);
  }
}

/** `wait` on a run id that does not exist (never enqueued, or its result retention expired). */
export class RunNotFoundError extends SluiceError {
  constructor(
    /** The run id asked for. */
    override readonly runId: string,
  ) {
    super(`Run ${runId} does not exist (never enqueued, or its result expired after resultTtlMs)`);
  }
}

/**
 * Raised inside a run when this worker no longer holds the run's lease (it stalled and another
 * worker took the run over). The stale worker's writes are refused; the new owner carries on.
 */
export class LeaseLostError extends SluiceError {
  constructor(
    /** The run whose lease was lost. */
    override readonly runId: string,
    message = `Lease on run ${runId} was lost; another worker owns it now`,
  ) {
    super(message);
  }
}

/**
 * No renewal of the run's lease reached Redis for about the lease's length (`worker.lockMs`):
 * every heartbeat failed, Redis being unreachable. The lease may have lapsed, and another worker
 * may take the run over, so the worker stops the attempt (its signal aborts with this error, and
 * its next step call rejects): two attempts must not execute steps side by side. Nothing counts
 * as a failure: the run is handed back once Redis answers, or its lease lapses and the stalled
 * scan recovers it.
 */
export class LeaseUnconfirmedError extends LeaseLostError {
  constructor(runId: string, lockMs: number) {
    super(
      runId,
      `Lease on run ${runId} could not be renewed for ${lockMs} ms (Redis unreachable); the attempt stops before another worker may take the run over`,
    );
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
    /** The run whose memo is full. */
    override readonly runId: string,
    /** The step's memo key, `name#occurrence`. */
    readonly stepKey: string,
    /** What this step's entry (key plus encoded result) would add. */
    readonly stepBytes: number,
    /** The memo's size with this entry. */
    readonly bytes: number,
    /** The budget, in bytes (`maxRunMemoBytes`). */
    readonly limit: number,
  ) {
    super(
      `Run ${runId}: the result of step "${stepKey}" (${stepBytes} bytes) would bring the run's step memo to ${bytes} bytes, over the limit of ${limit} bytes (maxRunMemoBytes)`,
    );
  }
}

/**
 * A run attempt or a step ran past its time limit (`@Workflow({ timeoutMs })`, the enqueue's
 * `runTimeoutMs`, or a step's `timeoutMs`). It is what `ctx.signal` (and a step's own signal)
 * aborts with, and what the attempt fails with. Retryable like any failure: the run's `attempts`
 * and `backoff` apply (a step limit counts as one failure of the step first, under its own
 * `attempts`).
 */
export class TimeoutError extends SluiceError {
  constructor(
    /** The run that timed out. */
    override readonly runId: string,
    /** The limit that ran out, in ms. */
    readonly limitMs: number,
    /** The step's memo key (`name#occurrence`) when a step's limit ran out; undefined for the run's. */
    readonly step?: string,
  ) {
    super(
      step === undefined ? `Run ${runId} timed out after ${limitMs} ms` : `Step "${step}" of run ${runId} timed out after ${limitMs} ms`,
    );
  }
}

/**
 * The run was cancelled (`QueueClient.cancel`): `wait`/`run`/`result` reject with it, and inside
 * the run `ctx.signal` aborts with it as its reason. `reason` is the one given to `cancel`.
 */
export class RunCancelledError extends SluiceError {
  constructor(
    /** The cancelled run. */
    override readonly runId: string,
    /** The reason given to `cancel` (`CancelOptions.reason`); absent if none was. */
    readonly reason?: string,
  ) {
    super(`Run ${runId} was cancelled${reason ? `: ${reason}` : ''}`);
  }
}

/**
 * The worker running the attempt is shutting down and `worker.shutdownTimeoutMs` passed:
 * `ctx.signal` aborts with it. The run is handed back to the queue without counting a failure,
 * whatever the attempt does after (an error it throws then is not recorded, and no `failed`
 * event fires); another worker runs it again.
 */
export class WorkerShutdownError extends SluiceError {
  constructor(
    /** The run whose attempt is stopped. */
    override readonly runId: string,
  ) {
    super(`Run ${runId}: the worker is shutting down; the run is handed back to the queue`);
  }
}

/**
 * An operation on a run that its state does not allow, e.g. `retry` of a run that has not failed
 * or `remove` of a run that has not finished (cancel it first). Nothing was written.
 */
export class RunStateError extends SluiceError {
  constructor(
    /** The run the operation was asked for. */
    override readonly runId: string,
    /** The state the run is in. */
    readonly state: string,
    /** The states the operation accepts. */
    readonly expected: readonly string[],
    operation: string,
  ) {
    super(`Cannot ${operation} run ${runId}: it is ${state}, expected ${expected.join(' or ')}`);
  }
}
