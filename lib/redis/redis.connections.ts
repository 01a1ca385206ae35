import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import IORedis, { Redis, RedisOptions } from 'ioredis';
import { SluiceError } from '../errors';
import { RESOLVED_QUEUE_OPTIONS } from '../queue.constants';
import type { RedisConnectionOptions, ResolvedQueueOptions } from '../queue.options';

type Role = 'command' | 'blocking' | 'subscriber';

/**
 * The process's Redis connections — at most three, however many workflows it runs:
 * `command` (scripts and reads, auto-pipelined), `blocking` (the worker's wait for a wake marker;
 * only in worker processes) and `subscriber` (done-channel subscriptions; opened by the first wait).
 * Connections are lazy: nothing connects before the first command, so module init does no I/O.
 */
@Injectable()
export class RedisConnections implements OnApplicationShutdown {
  private readonly logger = new Logger('Sluice');
  private readonly open = new Map<Role, Redis>();
  private closed = false;

  constructor(@Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions) {}

  get command(): Redis {
    return this.get('command');
  }

  get blocking(): Redis {
    return this.get('blocking');
  }

  get subscriber(): Redis {
    return this.get('subscriber');
  }

  /** Drops the blocking connection (interrupting a pending BLPOP); the next use opens a new one. */
  dropBlocking(): void {
    const blocking = this.open.get('blocking');
    this.open.delete('blocking');
    blocking?.disconnect();
  }

  async onApplicationShutdown(): Promise<void> {
    this.closed = true;
    const owned = [...this.open.entries()].filter(([role]) => role !== 'command' || !this.userInstance());
    this.open.clear();
    await Promise.all(owned.map(([, redis]) => redis.quit().catch(() => redis.disconnect())));
  }

  private get(role: Role): Redis {
    if (this.closed) throw new SluiceError(`QueueModule has shut down; its Redis ${role} connection is closed`);
    let redis = this.open.get(role);
    if (!redis) {
      redis = this.create(role);
      redis.on('error', (error: Error) => this.logger.warn(`Redis ${role} connection: ${error.message}`));
      this.open.set(role, redis);
    }
    return redis;
  }

  private create(role: Role): Redis {
    const tuning: RedisOptions = {
      lazyConnect: true,
      connectionName: `sluice:${this.options.namespace}:${role}`,
      // Commands on a blocking or subscriber connection must wait out a reconnect, not fail.
      maxRetriesPerRequest: role === 'command' ? 20 : null,
      // A script whose reply a disconnect swallowed may have run: sending it again could complete
      // or claim twice. Fail it instead; leases, idempotent ids and the stalled scan recover.
      autoResendUnfulfilledCommands: role !== 'command',
      enableAutoPipelining: false,
    };
    const user = this.userInstance();
    if (user) return role === 'command' ? user : user.duplicate(tuning);
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

  private userInstance(): Redis | undefined {
    const connection = this.options.connection as Partial<Redis>;
    return typeof connection.duplicate === 'function' && typeof connection.defineCommand === 'function' ? (connection as Redis) : undefined;
  }
}
