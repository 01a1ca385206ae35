import { SluiceError } from './sluice.error';

/**
 * Base class of the errors that mean Redis did not answer a call. Catch it to retry or to
 * report the infrastructure as down; the two subclasses tell whether anything may have changed.
 */
export class RedisConnectionError extends SluiceError {
  constructor(
    /** What Sluice was doing, e.g. `enqueue` or `get`. */
    readonly operation: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${operation}: ${message}`, options);
  }
}

/**
 * The call was never sent: Redis was not reachable within the call's bound (`redisTimeoutMs`).
 * Nothing changed in Redis, so the call can be retried as it is.
 */
export class RedisUnavailableError extends RedisConnectionError {}

/**
 * The call was sent but its reply was lost (the connection dropped, or no reply came within the
 * bound): it may or may not have taken effect. An enqueue can be retried with the same `id`
 * (`runId` names the id this call used), which is idempotent.
 */
export class OutcomeUnknownError extends RedisConnectionError {}

/**
 * Redis answered with an error (e.g. out of memory, a read-only replica, or `NOPERM`: an ACL user
 * without a permission Sluice needs, which the message then points to the rules for). Its message
 * is kept as `cause`.
 */
export class RedisCommandError extends SluiceError {
  constructor(
    /** What Sluice was doing, e.g. `enqueue` or a script's name. */
    readonly operation: string,
    cause: Error,
  ) {
    const hint = cause.message.startsWith('NOPERM')
      ? ' (the Redis ACL user lacks a permission Sluice needs: see docs/connections.md#acl-users)'
      : '';
    super(`${operation}: Redis replied with an error: ${cause.message}${hint}`, { cause });
  }
}

/**
 * A payload read from Redis (input, step result, result, signal or event payload) that this
 * version cannot decode: written in a payload format of a newer version (upgrade this process;
 * the run is retried like any failure, so a newer worker can take it), or damaged.
 */
export class PayloadDecodeError extends SluiceError {}
