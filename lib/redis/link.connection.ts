import type { Redis } from 'ioredis';
import { RedisUnavailableError, SluiceError } from '../errors';
import { OutageLog, type OutageLogger } from '../util/outage-log';
import { isSlotLeftPush } from './cluster/cluster.redirects';
import { InflightCalls } from './link.inflight';
import { canSend, destroy, type Role } from './link.options';
import { ReadyWaiters } from './link.waiters';

/**
 * The connection of a {@link RedisLink} and its replacements: opened on first use, reconnected
 * by ioredis after an error, replaced whole when it stops answering (a silent network loss: no
 * reset, so ioredis never notices, and the old socket may never close), retired when a cluster
 * slot moves. Tracks the calls waiting for it and the calls in flight over it.
 */
export class LinkConnection {
  instance?: Redis;
  closed = false;
  readonly waiting = new ReadyWaiters();
  readonly calls: InflightCalls;
  private readonly hooks: Array<(redis: Redis) => void> = [];
  /** One 'down' line per outage of this connection, summaries, one 'back' line (see OutageLog). */
  private readonly outage: OutageLog;
  /** Since when the connection has been lost and not ready again (see RedisLink.downSince). */
  private downAt?: number;
  private lastError = 'not connected yet';
  /** Connections left for a new one, closed once the calls sent over them have their replies (see {@link retire}). */
  private readonly retired = new Set<Redis>();

  constructor(
    readonly role: Role,
    private readonly create: () => Redis,
    logger: OutageLogger,
  ) {
    this.outage = new OutageLog(logger);
    this.calls = new InflightCalls({
      idle: (redis) => this.retired.has(redis) && this.drop(redis),
      overdue: (redis, reason) => this.recycle(redis, reason),
    });
  }

  get downSince(): number | undefined {
    if (this.closed || (!this.instance && this.waiting.size === 0)) return undefined;
    // An 'error' event while the connection stays ready (not a connection fault) is no outage.
    return this.instance?.status === 'ready' ? undefined : this.downAt;
  }

  get client(): Redis {
    if (this.closed) throw new SluiceError(`QueueModule has shut down; its Redis ${this.role} connection is closed`);
    return (this.instance ??= this.open());
  }

  onCreate(hook: (redis: Redis) => void): void {
    this.hooks.push(hook);
    if (this.instance) hook(this.instance);
  }

  /** The connection once ready, waiting at most until `deadline` ({@link RedisUnavailableError}: nothing was sent). */
  whenReady(operation: string, deadline: number, failFast = false): Promise<Redis> {
    const redis = this.client;
    if (canSend(redis)) return Promise.resolve(redis);
    if (redis.status === 'wait' || redis.status === 'end') redis.connect().catch(() => undefined);
    return this.waiting.wait(operation, deadline, failFast, (op) => this.unavailable(op));
  }

  unavailable(operation: string): RedisUnavailableError {
    return new RedisUnavailableError(operation, `Redis ${this.role} connection not ready in time (${this.lastError}); nothing was sent`);
  }

  /** See RedisLink.retire. */
  retire(): void {
    const redis = this.instance;
    if (!redis || this.closed) return;
    this.instance = undefined;
    if (this.calls.count(redis) > 0) this.retired.add(redis);
    else this.drop(redis);
    // Someone may be subscribed or blocked over the old connection: they carry on over the new one.
    this.client.connect().catch(() => undefined);
  }

  /** Replaces an instance that stopped answering: its socket may never close, so it is destroyed. */
  recycle(redis: Redis, reason: string, expected = false): void {
    this.calls.lose(redis, 'the connection was replaced before the reply');
    this.calls.forget(redis);
    if (this.retired.has(redis)) this.drop(redis);
    if (this.instance !== redis) return;
    // During a silent network loss every call times out and replaces the connection: summarised.
    if (!expected) this.outage.warn(`Redis ${this.role} connection: ${reason}; opening a new one (repeats are summarised)`);
    this.instance = undefined;
    this.lastError = reason;
    destroy(redis);
    // Down from now if a call waits for the new connection; otherwise idle (opened on demand).
    this.downAt = !expected && this.waiting.size > 0 ? (this.downAt ?? Date.now()) : undefined;
    if (this.waiting.size > 0 && !this.closed) this.client.connect().catch(() => undefined);
  }

  /** See RedisLink.close. */
  async close(): Promise<void> {
    this.closed = true;
    this.calls.stop();
    const error = new SluiceError(`QueueModule is shutting down; its Redis ${this.role} connection is closing`);
    this.waiting.failAll(error);
    this.calls.failAll(error);
    [...this.retired].forEach((redis) => this.drop(redis));
    const redis = this.instance;
    this.instance = undefined;
    if (!redis) return;
    let timer: NodeJS.Timeout | undefined;
    const quit =
      redis.status === 'ready'
        ? redis.quit().then(
            () => undefined,
            () => undefined,
          )
        : Promise.resolve();
    await Promise.race([quit, new Promise<void>((resolve) => (timer = setTimeout(resolve, 1_000)))]);
    clearTimeout(timer);
    destroy(redis);
  }

  private open(): Redis {
    const redis = this.create();
    redis.on('ready', () => {
      if (this.instance !== redis) return;
      this.downAt = undefined;
      this.outage.recovered(`Redis ${this.role} connection back`);
      this.waiting.ready(redis);
    });
    redis.on('error', (error: Error) => {
      if (this.instance !== redis || isSlotLeftPush(error)) return;
      this.lastError = error.message;
      this.downAt ??= Date.now();
      // Every reconnect attempt of an outage fails like this: one line, then summaries.
      this.outage.warn(`Redis ${this.role} connection down: ${error.message}; reconnecting (repeats are summarised)`);
      this.waiting.failFast((operation) => this.unavailable(operation));
    });
    redis.on('close', () => {
      if (this.instance === redis) {
        if (this.lastError === 'not connected yet') this.lastError = 'connection closed';
        // A close alone (CLIENT KILL, a restart) is not logged: a reconnect that works at once
        // is no news. Its reconnect attempts' errors are.
        this.downAt ??= Date.now();
      }
      this.calls.lose(redis, 'the connection closed before the reply');
      // A retired connection is not reconnected (that would look the owner up and subscribe again).
      if (this.retired.has(redis)) this.drop(redis);
    });
    this.hooks.forEach((hook) => hook(redis));
    return redis;
  }

  private drop(redis: Redis): void {
    this.retired.delete(redis);
    this.calls.forget(redis);
    destroy(redis);
  }
}
