import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { RESOLVED_QUEUE_OPTIONS } from '../queue.constants';
import type { ResolvedQueueOptions } from '../queue.options';
import { createRedisClient } from './redis.factory';
import { RedisLink, Role } from './redis.link';

/**
 * The process's Redis connections — at most three, however many workflows it runs:
 * `command` (scripts and reads), `blocking` (the worker's wait for a wake marker; only in worker
 * processes) and `subscriber` (done- and progress-channel subscriptions, opened by the first wait;
 * in worker processes also the cancel channel, opened at start). Each is a
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
    return createRedisClient(this.options, role);
  }
}
