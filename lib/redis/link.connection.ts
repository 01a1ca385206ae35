import type { Redis } from 'ioredis';
import { RedisUnavailableError, SluiceError } from '../errors';
import { OutageLog, type OutageLogger } from '../util/outage-log';
import { isSlotLeftPush } from './cluster/cluster.redirects';
import { InflightCalls } from './link.inflight';
import { isSentinelInstance } from '../interfaces/sentinel.options';
import { canSend, destroy, inOneWrite, type Role } from './link.options';
import type { ConnectionNames } from './link.names';
import type { LinkSiblings } from './link.siblings';
import { SilentCloseWatch } from './link.silent-close';
import { ReadyWaiters } from './link.waiters';

/** Pause between two ready checks of a server that is loading its data (or refused one for now). */
const LOADING_POLL_MS = 200;
/** An INFO refused for good (an ACL without +info, a proxy without the command): the ready check cannot tell, so it passes. */
const INFO_REFUSED = /^(NOPERM|ERR unknown command)/;

/** The replies {@link LinkConnection.takeReadyRead} hands over. */
export interface ReadyReads {
  info?: Promise<string>;
  save?: Promise<string[]>;
}

/**
 * The connection of a {@link RedisLink} and its replacements: opened on first use, reconnected
 * by ioredis after an error, replaced whole when it stops answering (a silent network loss: no
 * reset, so ioredis never notices, and the old socket may never close), retired when a cluster
 * slot moves. Tracks the calls waiting for it and the calls in flight over it.
 *
 * Ready check: a server still loading its data answers most commands with `LOADING` (nothing
 * ran), so a connection is taken as ready only once an `INFO` says it is not loading. Sluice's own
 * connections make that check here rather than in ioredis (`enableReadyCheck: false`, see
 * redis.factory.ts), and without waiting for it: the calls that waited for the connection go out
 * in the check's own write, since a server is almost never loading. If it is, their `LOADING`
 * replies send them again once the check passes (RedisLink counts them as unsent), and later
 * calls wait for it. The command connection's first check also reads the whole `INFO` and `CONFIG
 * GET save`, which the boot's server check takes instead of asking again (see
 * {@link takeReadyRead}). A check whose reply never comes replaces the connection like any overdue
 * call. The subscriber is never checked: (S)SUBSCRIBE and
 * UNSUBSCRIBE work while Redis loads. A connection whose ioredis makes the check itself (a user's
 * instance, duplicated with its own settings: a Sentinel's checks the master's role too) is
 * ready when ioredis says so.
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
  /** The connection whose ready check passed since it last connected (see the class comment). */
  private checked?: Redis;
  /**
   * The reads the command connection's first ready check sent for the boot's server check, each
   * until the server check takes it (see {@link takeReadyRead}): `INFO` whole and `CONFIG GET save`.
   */
  private readyReads?: ReadyReads & { redis: Redis };
  private readyReadsSent = false;
  /** Whether the calls may go out with the check, or wait for its reply (a server that closed without a word). */
  private readonly silent = new SilentCloseWatch();

  /**
   * @param checkTimeoutMs bound of a ready check's reply: past it the connection is replaced
   * @param names names the connection (CLIENT SETNAME), in the ready check's write (a refusal is no failure: see ConnectionNames)
   * @param siblings the other connections to the same Redis, told when this one is ready again
   */
  constructor(
    readonly role: Role,
    private readonly create: () => Redis,
    logger: OutageLogger,
    private readonly checkTimeoutMs = 10_000,
    private readonly names?: ConnectionNames,
    private readonly siblings?: LinkSiblings,
  ) {
    siblings?.join(this);
    this.outage = new OutageLog(logger);
    this.calls = new InflightCalls({
      idle: (redis) => this.retired.has(redis) && this.drop(redis),
      overdue: (redis, reason) => this.recycle(redis, reason),
    });
  }

  get downSince(): number | undefined {
    if (this.closed || (!this.instance && this.waiting.size === 0)) return undefined;
    // An 'error' event while the connection stays ready (not a connection fault) is no outage.
    return this.instance && this.usable(this.instance) ? undefined : this.downAt;
  }

  /** Why the connection was last not usable (a connection error, or a refusal such as READONLY). */
  get lastDownReason(): string {
    return this.lastError;
  }

  /** Whether a call can go over `redis` now: ioredis would send it, and its ready check passed. */
  usable(redis: Redis): boolean {
    return canSend(redis) && (this.checked === redis || !this.checksItself(redis));
  }

  /**
   * A reply to what `redis`'s first ready check (command connection) sent for the boot's server
   * check, if not taken yet: its `INFO` whole, or its `CONFIG GET save` (needed when AOF is off).
   * The server check reads it instead of asking Redis again. Its rejection is ioredis's own error
   * (a refusal is a `ReplyError`).
   */
  takeReadyRead<K extends 'info' | 'save'>(redis: Redis, read: K): ReadyReads[K] | undefined {
    const reads = this.readyReads;
    if (reads?.redis !== redis) return undefined;
    const reply = reads[read];
    reads[read] = undefined;
    return reply;
  }

  get client(): Redis {
    if (this.closed) throw new SluiceError(`QueueModule has shut down; its Redis ${this.role} connection is closed`);
    return (this.instance ??= this.createInstance());
  }

  onCreate(hook: (redis: Redis) => void): void {
    this.hooks.push(hook);
    if (this.instance) hook(this.instance);
  }

  /** The connection once ready, waiting at most until `deadline` ({@link RedisUnavailableError}: nothing was sent). */
  whenReady(operation: string, deadline: number, failFast = false): Promise<Redis> {
    const redis = this.client;
    if (this.usable(redis)) return Promise.resolve(redis);
    if (redis.status === 'wait' || redis.status === 'end') redis.connect().catch(() => undefined);
    return this.waiting.wait(operation, deadline, failFast, (op) => this.unavailable(op));
  }

  /** Reconnects now if ioredis is waiting out a reconnect pause (a sibling found Redis back, see LinkSiblings). */
  reconnectNow(): void {
    const redis = this.instance;
    if (this.closed || redis?.status !== 'reconnecting') return;
    // ioredis's pending attempt would connect again later, beside this one.
    const pause = redis as unknown as { reconnectTimeout?: NodeJS.Timeout | null };
    if (pause.reconnectTimeout) clearTimeout(pause.reconnectTimeout);
    pause.reconnectTimeout = null;
    redis.connect().catch(() => undefined);
  }

  /** A reply that refused a call without running it (LOADING, READONLY): what a call that gives up waiting reports. */
  noteRefusal(reply: string): void {
    this.lastError = reply;
  }

  unavailable(operation: string): RedisUnavailableError {
    return new RedisUnavailableError(operation, `Redis ${this.role} connection not ready in time (${this.lastError}); nothing was sent`);
  }

  /** See RedisLink.open. */
  open(): void {
    if (this.closed) return;
    const redis = this.client;
    if (redis.status === 'wait' || redis.status === 'end') redis.connect().catch(() => undefined);
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

  private createInstance(): Redis {
    const redis = this.create();
    redis.on('ready', () => {
      if (this.instance !== redis) return;
      // The name goes with the ready check rather than before it (ioredis's connectionName waits
      // for its reply), and so do the calls that waited (see the class comment): no round trip
      // of its own before a usable connection.
      if (this.checksItself(redis)) {
        this.silent.checkSent(redis);
        return inOneWrite(redis, () => (this.sendName(redis), this.check(redis), this.silent.cautious || this.release(redis)));
      }
      // Ready at once (the subscriber; or ioredis checked it): the name goes with the calls that waited.
      inOneWrite(redis, () => (this.sendName(redis), this.becameReady(redis)));
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
      // The next connect is checked again (a restarted server may be loading).
      if (this.checked === redis) this.checked = undefined;
      const silent = this.silent.closed(redis);
      if (this.instance === redis) {
        if (silent) {
          this.lastError = silent;
          this.outage.warn(`Redis ${this.role} connection down: ${silent}; reconnecting (repeats are summarised)`);
        } else if (this.lastError === 'not connected yet') this.lastError = 'connection closed';
        // A close alone (CLIENT KILL, a restart) is not logged: a reconnect that works at once
        // is no news. Its reconnect attempts' errors are.
        this.downAt ??= Date.now();
      }
      this.calls.lose(redis, 'the connection closed before the reply');
      // A retired connection is not reconnected (that would look the owner up and subscribe again).
      if (this.retired.has(redis)) this.drop(redis);
    });
    this.hooks.forEach((hook) => hook(redis));
    // A given instance may be connected already: its 'ready' has been and gone.
    if (redis.status === 'ready' && this.checksItself(redis)) queueMicrotask(() => this.instance === redis && this.check(redis));
    return redis;
  }

  /** Whether this link makes `redis`'s ready check (ioredis does not; see the class comment). */
  private checksItself(redis: Redis): boolean {
    return this.role !== 'subscriber' && redis.options.enableReadyCheck === false;
  }

  /**
   * The ready check: an `INFO` (the whole of it on the command connection, for the server check;
   * else its persistence section), sent again while Redis is loading. Bounded like a call: no
   * reply in time replaces the connection. A refused `INFO` (an ACL without +info, a proxy)
   * cannot tell, and is taken as ready, as ioredis does.
   */
  private check(redis: Redis): void {
    const whole = this.role === 'command';
    const deadline = Date.now() + this.checkTimeoutMs;
    const read = <T>(operation: string, send: (r: Redis) => Promise<T>) =>
      this.calls.send(`ready check (${operation})`, redis, send, deadline, false, (_, error) => error);
    // Behind Sentinel, the role too: a sentinel asked mid-failover may still name the old primary.
    const sentinel = isSentinelInstance(redis);
    const info = read('INFO', (r) => (whole ? r.info() : sentinel ? r.info('persistence', 'replication') : r.info('persistence')));
    if (whole && !this.readyReadsSent) {
      this.readyReadsSent = true;
      const save = read('CONFIG GET save', (r) => r.config('GET', 'save') as Promise<string[]>);
      save.catch(() => undefined); // read by the server check, if it takes it
      this.readyReads = { redis, info, save };
    }
    info.then(
      (text) => {
        this.silent.answered(redis);
        if (this.instance !== redis || !canSend(redis)) return;
        if (sentinel && /^role:slave\r?$/m.test(text)) return this.reachedReplica(redis);
        if (!/^loading:1\r?$/m.test(text)) return this.becameReady(redis);
        this.loading(redis, 'Redis is loading its data');
      },
      (error: Error) => {
        // A lost reply or a closed connection: its close (or replacement) starts over.
        if (error?.name === 'ReplyError') this.silent.answered(redis);
        if (this.instance !== redis || !canSend(redis) || error?.name !== 'ReplyError') return;
        if (INFO_REFUSED.test(error.message)) return this.becameReady(redis);
        // Any other refusal (BUSY: a script runs too long) says nothing about loading: ask again.
        this.loading(redis, `ready check: ${error.message}`);
      },
    );
  }

  /**
   * Connected (through the sentinels) to a node that is a replica now: reconnect, which asks the
   * sentinels again. The calls sent with the check are refused (READONLY) and wait, as while loading.
   */
  private reachedReplica(redis: Redis): void {
    this.notReady(redis, 'the sentinels named a node that is a replica now (a failover in progress)');
    setTimeout(() => this.instance === redis && redis.disconnect(true), LOADING_POLL_MS).unref();
  }

  /** The check did not pass: calls wait for the next one (those sent meanwhile are refused, and sent again). */
  private loading(redis: Redis, reason: string): void {
    this.notReady(redis, reason);
    this.checkAgain(redis);
  }

  private notReady(redis: Redis, reason: string): void {
    if (this.checked === redis) this.checked = undefined;
    this.lastError = reason;
  }

  private checkAgain(redis: Redis): void {
    // Unref'd: the connection's socket keeps the process alive, not this timer, once it is closed.
    setTimeout(() => this.instance === redis && canSend(redis) && this.check(redis), LOADING_POLL_MS).unref();
  }

  private sendName(redis: Redis): void {
    // Like ioredis's own: a server or proxy that refuses it still serves the connection.
    this.names?.send(redis, this.role);
  }

  private becameReady(redis: Redis): void {
    this.downAt = undefined;
    this.siblings?.back(this);
    this.outage.recovered(`Redis ${this.role} connection back`);
    this.release(redis);
  }

  /** Takes `redis` as usable, and sends the calls that waited for it. */
  private release(redis: Redis): void {
    if (this.checksItself(redis)) this.checked = redis;
    if (this.waiting.size === 0) return;
    // The calls that waited for the connection go out in one write: each resumes one microtask
    // after this (see RedisLink.attempts), before the microtask queued after them ends the write.
    const stream = (redis as unknown as { stream?: { cork?: () => void; uncork?: () => void } }).stream;
    stream?.cork?.();
    this.waiting.ready(redis);
    queueMicrotask(() => stream?.uncork?.());
  }

  private drop(redis: Redis): void {
    this.retired.delete(redis);
    this.calls.forget(redis);
    destroy(redis);
  }
}
