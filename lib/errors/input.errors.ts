import { SluiceError } from './sluice.error';

/**
 * Bad input from the caller. Always thrown before any Redis call, so nothing is half-written.
 * `field` names the offending argument, e.g. `opts.delay` or `input.items[2]`.
 */
export class InvalidInputError extends SluiceError {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

/** `enqueue('name', …)` with a name no `@Workflow` in this application declares. */
export class UnknownWorkflowError extends InvalidInputError {
  constructor(readonly workflow: string) {
    super('workflow', `unknown workflow "${workflow}" (no @Workflow provider with that name is registered in this application)`);
  }
}

/** A run id, workflow, step or group name that is empty, too long, or would break the Redis key layout. */
export class InvalidNameError extends InvalidInputError {}

/** A numeric option (delay, priority, attempts, timeout…) that is negative, NaN, fractional or out of range. */
export class InvalidOptionError extends InvalidInputError {}

/** A value JSON cannot round-trip: a function, BigInt, symbol, NaN/Infinity, Map/Set or a circular reference. */
export class PayloadNotSerializableError extends InvalidInputError {}

/** An encoded payload (input, step result or run result) larger than `maxPayloadBytes`. */
export class PayloadTooLargeError extends InvalidInputError {
  constructor(
    field: string,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(field, `encoded size ${bytes} bytes exceeds the limit of ${limit} bytes (maxPayloadBytes)`);
  }
}
