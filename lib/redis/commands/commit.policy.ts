import type { CallOptions } from '../redis.link';

/** The options {@link commitPolicy} reads (ResolvedQueueOptions has them). */
export interface CommitBounds {
  redisTimeoutMs: number;
  worker: { lockMs: number };
}

/**
 * How a worker's commits are sent: a lost reply is sent again once the connection is back (every
 * commit recognises its own earlier landing by token, and a claiming call its own claims by call
 * id), for up to one lease length; each try waits at most `redisTimeoutMs` for its reply. Past
 * that the commit fails, its run leaves the active set, its lease lapses and the stalled scan
 * recovers it.
 */
export function commitPolicy(options: CommitBounds): CallOptions {
  return { idempotent: true, timeoutMs: options.worker.lockMs, replyTimeoutMs: options.redisTimeoutMs };
}
