import IORedis, { Redis, RedisOptions } from 'ioredis';
import type { RedisConnectionOptions, ResolvedQueueOptions } from '../queue.options';
import type { Role } from './redis.link';
import { userRedisInstance } from './user-instance';
import { jitteredPause } from '../util/retry';

/** Longest pause between reconnect attempts: an outage is noticed over within this of its end. */
export const MAX_RECONNECT_DELAY_MS = 2_000;

/**
 * A new ioredis instance for one of Sluice's connections, with Sluice's settings (lazy, no offline
 * queue but on the subscriber, no automatic resend, bounded connect, jittered reconnects), from
 * the connection options or as a duplicate of the user's instance. Wrap it in a `RedisLink`.
 */
export function createRedisClient(options: Pick<ResolvedQueueOptions, 'connection' | 'namespace' | 'redisTimeoutMs'>, role: Role): Redis {
  const tuning: RedisOptions = {
    lazyConnect: true,
    connectionName: `sluice:${options.namespace}:${role}`,
    // A call made while the connection is down waits for it in RedisLink (with a bound), not in
    // ioredis's offline queue, so a call that times out there is known never to have been sent.
    // The subscriber keeps the queue: subscriptions must follow their unsubscriptions in order.
    enableOfflineQueue: role === 'subscriber',
    maxRetriesPerRequest: null,
    // A script whose reply a disconnect swallowed may have run: sending it again could complete
    // or claim twice. RedisLink fails it instead; idempotent calls are retried by design.
    autoResendUnfulfilledCommands: false,
    enableAutoPipelining: false,
    connectTimeout: options.redisTimeoutMs,
    // ioredis waits this long for a socket it ended to close, on a timer that keeps the process
    // alive, and never clears it for a socket that had already failed to connect: with its 2 s
    // default, an app closed during an outage lingered 2 s. Sluice quits (bounded) before it ends
    // a connection, so the socket is closed already when this matters.
    disconnectTimeout: 100,
    retryStrategy: (attempt: number) => jitteredPause(attempt, 50, MAX_RECONNECT_DELAY_MS),
  };
  const user = userRedisInstance(options.connection);
  if (user) return user.duplicate(tuning);
  const connection = options.connection as RedisConnectionOptions;
  const fields: RedisOptions = {
    ...(connection.host !== undefined && { host: connection.host }),
    ...(connection.port !== undefined && { port: connection.port }),
    ...(connection.username !== undefined && { username: connection.username }),
    ...(connection.password !== undefined && { password: connection.password }),
    ...(connection.db !== undefined && { db: connection.db }),
    ...(connection.tls && { tls: connection.tls === true ? {} : connection.tls }),
    ...tuning,
  };
  return connection.url ? new IORedis(connection.url, fields) : new IORedis(fields);
}
