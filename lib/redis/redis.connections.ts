import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import IORedis, { Redis, RedisOptions } from 'ioredis';
import { RESOLVED_QUEUE_OPTIONS } from '../queue.constants';
import type { RedisConnectionOptions, ResolvedQueueOptions } from '../queue.options';
import { RedisLink, Role } from './redis.link';
import { userRedisInstance } from './user-instance';

/** Longest pause between reconnect attempts: an outage is noticed over within this of its end. */
const MAX_RECONNECT_DELAY_MS = 2_000;

/**
 * The process's Redis connections — at most three, however many workflows it runs:
 * `command` (scripts and reads), `blocking` (the worker's wait for a wake marker; only in worker
 * processes) and `subscriber` (done-channel subscriptions; opened by the first wait). Each is a
 * {@link RedisLink}, so no call over it can hang. Connections are lazy: nothing connects before
 * the first command, so module init does no I/O. All three are Sluice's own, also when the
 * options give an ioredis instance: it is duplicated with Sluice's settings (and left open).
 */
@Injectable()
export class RedisConnections implements OnApplicationShutdown {
  private readonly logger = new Logger('Sluice');
  readonly command: RedisLink;
  readonly blocking: RedisLink;
  readonly subscriber: RedisLink;

  constructor(@Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions) {
    const link = (role: Role) => new RedisLink(role, () => this.create(role), options.redisTimeoutMs, this.logger);
    this.command = link('command');
    this.blocking = link('blocking');
    this.subscriber = link('subscriber');
  }

  async onApplicationShutdown(): Promise<void> {
    await Promise.all([this.command, this.blocking, this.subscriber].map((link) => link.close()));
  }

  private create(role: Role): Redis {
    const tuning: RedisOptions = {
      lazyConnect: true,
      connectionName: `sluice:${this.options.namespace}:${role}`,
      // A call made while the connection is down waits for it in RedisLink (with a bound), not in
      // ioredis's offline queue, so a call that times out there is known never to have been sent.
      // The subscriber keeps the queue: subscriptions must follow their unsubscriptions in order.
      enableOfflineQueue: role === 'subscriber',
      maxRetriesPerRequest: null,
      // A script whose reply a disconnect swallowed may have run: sending it again could complete
      // or claim twice. RedisLink fails it instead; idempotent calls are retried by design.
      autoResendUnfulfilledCommands: false,
      enableAutoPipelining: false,
      connectTimeout: this.options.redisTimeoutMs,
      retryStrategy: (attempt: number) => Math.round(Math.min(MAX_RECONNECT_DELAY_MS, 50 * 2 ** Math.min(attempt, 6)) * (0.5 + Math.random() / 2)),
    };
    const user = userRedisInstance(this.options.connection);
    if (user) return user.duplicate(tuning);
    const connection = this.options.connection as RedisConnectionOptions;
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
}
