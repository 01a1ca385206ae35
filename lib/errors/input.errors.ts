import { SluiceError } from './sluice.error';

/**
 * Bad input from the caller, thrown before anything is written: before any Redis call, except that an
 * `UnknownWorkflowError` may follow one read of the fleet's `workflows` set.
 * `field` names the offending argument, e.g. `opts.delay` or `input.items[2]`.
 */
export class InvalidInputError extends SluiceError {
  /** @param options.cause what was caught on the way, e.g. the error a `toJSON()` threw. */
  constructor(
    /** The offending argument or value: an option (`opts.delayMs`) or a path into a payload (`input.items[2]`). */
    readonly field: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${field}: ${message}`, options);
  }
}

/**
 * `enqueue('name', …)` with a name (or contract) that no `@Workflow` in this application declares
 * and no worker of the fleet registered in Redis, or a class without `@Workflow`.
 */
export class UnknownWorkflowError extends InvalidInputError {
  /** @param detail why it is unknown; default: not declared in this application */
  constructor(
    /** The workflow name asked for (a class without `@Workflow`: its class name). */
    readonly workflow: string,
    detail = 'no @Workflow provider with that name is registered in this application',
  ) {
    super('workflow', `unknown workflow "${workflow}" (${detail})`);
  }
}

/** A run id, workflow, step or group name that is empty, too long, or would break the Redis key layout. */
export class InvalidNameError extends InvalidInputError {}

/** A numeric option (delay, priority, attempts, timeout…) that is negative, NaN, fractional or out of range. */
export class InvalidOptionError extends InvalidInputError {}

/**
 * A value a payload cannot keep (see `Stored`): a function, symbol, Error, WeakMap/WeakSet/WeakRef,
 * Promise, ArrayBuffer or DataView, a hole in an array, a circular reference, nesting deeper than
 * `MAX_PAYLOAD_DEPTH`, or a `toJSON()` that throws or returns something JSON cannot keep.
 * `field` is the path of the offending value, e.g. `input.items[2]`.
 */
export class PayloadNotSerializableError extends InvalidInputError {}

/** An encoded payload (input, step result or run result) larger than `maxPayloadBytes`, or a progress value larger than `MAX_PROGRESS_BYTES`. */
export class PayloadTooLargeError extends InvalidInputError {
  constructor(
    field: string,
    /** The payload's encoded size, in bytes. */
    readonly bytes: number,
    /** The bound it exceeds, in bytes (e.g. `maxPayloadBytes`). */
    readonly limit: number,
    /** The name of the bound, for the message. */
    bound = 'maxPayloadBytes',
  ) {
    super(field, `encoded size ${bytes} bytes exceeds the limit of ${limit} bytes (${bound})`);
  }
}
