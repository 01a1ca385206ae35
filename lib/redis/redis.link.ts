import type { Redis } from 'ioredis';
import { OutcomeUnknownError, RedisCommandError, RedisUnavailableError, SluiceError } from '../errors';
import { OutageLog, type OutageLogger } from '../util/outage-log';
import { ClusterRedirect, clusterRedirect, isSlotLeftPush } from './cluster/cluster.redirects';

export type Role = 'command' | 'blocking' | 'subscriber';

/** How one call over a {@link RedisLink} is bounded. */
export interface CallOptions {
  /** Bound of the whole call, waiting for the connection and retries included. Default: the link's. */
  timeoutMs?: number;
  /** Longest wait for one reply once sent (the blocking read: its block time plus grace). Default: what is left of `timeoutMs`. */
  replyTimeoutMs?: number;
  /** Send again after a lost reply while time is left: only for calls whose repetition is harmless. */
  idempotent?: boolean;
  /** While waiting for the connection, give up at its first error instead of at the deadline (bootstrap). */
  failFast?: boolean;
}

interface Waiter {
  ready(redis: Redis): void;
  fail(error: Error): void;
  operation: string;
  failFast?: boolean;
}

interface InFlight {
  deadline: number;
  operation: string;
  lost(reason: string): void;
  fail(error: Error): void;
}

/** How often overdue replies are looked for (see RedisLink.sweep). */
const SWEEP_MS = 100;
/** Pause before sending again a call a cluster refused while its slot migrates or fails over. */
const REDIRECT_PAUSE_MS = 100;

/** Where a link on a Redis Cluster reports a `MOVED` reply (see SlotOwner). */
export interface RedirectListener {
  moved(to: string): void;
}

/**
 * Pause before sending again a call ioredis refused unsent: its socket died a moment ago and the
 * 'close' that starts the reconnect has yet to be handled; the pause lets it run.
 */
const UNSENT_PAUSE_MS = 10;

function pauseUntil(ms: number, deadline: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(ms, deadline - Date.now()))));
}

/**
 * Whether ioredis would send a command now. Its status stays 'ready' for a moment after the
 * socket dies (a reset: the socket is destroyed at once, its 'close' handled a tick later), and a
 * command sent then is refused ("Stream isn't writeable"), so the socket is looked at too.
 */
function canSend(redis: Redis): boolean {
  return redis.status === 'ready' && (redis as unknown as { stream?: { writable?: boolean } }).stream?.writable !== false;
}

function replyDeadline(deadline: number, options: CallOptions): number {
  return options.replyTimeoutMs === undefined ? deadline : Math.min(deadline, Date.now() + options.replyTimeoutMs);
}

/**
 * One Redis connection of a role, and the rule that no call over it can hang: every call waits at
 * most its bound for the connection to be ready ({@link RedisUnavailableError}: nothing was sent),
 * then at most its bound for the reply ({@link OutcomeUnknownError}: it may have run). A reply the
 * connection drops fails its call at once — ioredis 5 leaves such a promise pending for ever when
 * commands are not resent, and resending a script that did run could commit or claim twice. A
 * connection that stops answering (a silent network loss: no reset, so ioredis never notices) is
 * replaced whole, since the old socket may never close.
 */
export class RedisLink {
  private instance?: Redis;
  private readonly waiting = new Set<Waiter>();
  private readonly inflight = new Map<Redis, Set<InFlight>>();
  private readonly hooks: Array<(redis: Redis) => void> = [];
  /** One 'down' line per outage of this connection, summaries, one 'back' line (see OutageLog). */
  private readonly outage: OutageLog;
  /** Since when the connection has been lost and not ready again (see {@link downSince}). */
  private downAt?: number;
  private lastError = 'not connected yet';
  private closed = false;
  private sweeper?: NodeJS.Timeout;
  /** Connections left for a new one, closed once the calls sent over them have their replies (see {@link retire}). */
  private readonly retired = new Set<Redis>();

  /** @param redirects set on a Redis Cluster: the link then sends again the calls a node redirected (nothing ran). */
  constructor(
    readonly role: Role,
    private readonly create: () => Redis,
    private readonly timeoutMs: number,
    logger: OutageLogger,
    private readonly redirects?: RedirectListener,
  ) {
    this.outage = new OutageLog(logger);
  }

  /**
   * Since when (local clock) this link has wanted a connection and had none ready: its connection
   * closed or failed and has not been ready since. Undefined while it is ready, and while it is
   * idle with no connection (never used, or replaced with no call waiting): a link nobody needs
   * is not down. Health uses it to see a worker whose blocking connection cannot come back.
   */
  get downSince(): number | undefined {
    if (this.closed || (!this.instance && this.waiting.size === 0)) return undefined;
    // An 'error' event while the connection stays ready (not a connection fault) is no outage.
    return this.instance?.status === 'ready' ? undefined : this.downAt;
  }

  /** Whether the link has a connection (in any state): after a replacement it has none until the next call. */
  get hasConnection(): boolean {
    return this.instance !== undefined && !this.closed;
  }

  /** The current ioredis instance, created (not connected) on first use. */
  get client(): Redis {
    if (this.closed) throw new SluiceError(`QueueModule has shut down; its Redis ${this.role} connection is closed`);
    return (this.instance ??= this.open());
  }

  /** Runs `hook` on every instance this link creates (now, if one exists): listeners, script definitions. */
  onCreate(hook: (redis: Redis) => void): void {
    this.hooks.push(hook);
    if (this.instance) hook(this.instance);
  }

  /** Sends one call under the link's bounds; see {@link CallOptions}. */
  call<T>(operation: string, send: (redis: Redis, retry: boolean) => Promise<T>, options: CallOptions = {}): Promise<T> {
    const deadline = Date.now() + (options.timeoutMs ?? this.timeoutMs);
    const redis = this.instance;
    if (!redis || !canSend(redis) || this.closed) return this.attempts(operation, send, options, deadline);
    // The common case, kept lean (it runs for every command): the connection is up, send now.
    return this.send(operation, redis, send, replyDeadline(deadline, options), false).catch((error: Error) => this.retry(error, operation, send, options, deadline));
  }

  private async retry<T>(error: Error, operation: string, send: (redis: Redis, retry: boolean) => Promise<T>, options: CallOptions, deadline: number): Promise<T> {
    if (error instanceof ClusterRedirect) {
      await this.follow(error, operation, deadline);
      return this.attempts(operation, send, options, deadline);
    }
    if (this.mayResendUnsent(error, options, deadline)) {
      await pauseUntil(UNSENT_PAUSE_MS, deadline);
      return this.attempts(operation, send, options, deadline);
    }
    if (!options.idempotent || !(error instanceof OutcomeUnknownError) || this.closed || Date.now() >= deadline) throw error;
    return this.attempts(operation, send, options, deadline, error);
  }

  /**
   * Before sending again a call a cluster node redirected: a `MOVED` moves the link to the new
   * owner; the other redirects (a migrating slot, a failover) mean waiting a little. Nothing ran,
   * so at the deadline the call fails as unavailable (or as lost, if an earlier try was).
   */
  private async follow(redirect: ClusterRedirect, operation: string, deadline: number, lost?: OutcomeUnknownError): Promise<void> {
    if (redirect.movedTo) {
      // The owner's listeners retire every link's connection when the owner changes; this one
      // may have been opened before, to the old owner, so it moves too.
      this.redirects?.moved(redirect.movedTo);
      if (redirect.connection === this.instance) this.retire();
    }
    const pause = redirect.movedTo ? 0 : Math.min(REDIRECT_PAUSE_MS, deadline - Date.now());
    if (pause < 0 || this.closed || Date.now() >= deadline) {
      throw lost ?? new RedisUnavailableError(operation, `Redis Cluster still answered "${redirect.message}" at the call's deadline; nothing was sent that ran`);
    }
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
  }

  /** Waits for the connection, sends, and (if idempotent) sends again after a lost reply, until the deadline. */
  private async attempts<T>(operation: string, send: (redis: Redis, retry: boolean) => Promise<T>, options: CallOptions, deadline: number, lost?: OutcomeUnknownError): Promise<T> {
    for (;;) {
      let redis: Redis;
      try {
        redis = await this.whenReady(operation, deadline, options.failFast);
      } catch (error) {
        // Once a try may have landed, the call's outcome stays unknown, whatever the later tries say.
        throw lost && error instanceof RedisUnavailableError ? lost : error;
      }
      try {
        return await this.send(operation, redis, send, replyDeadline(deadline, options), lost !== undefined);
      } catch (error) {
        if (error instanceof ClusterRedirect) {
          await this.follow(error, operation, deadline, lost);
          continue;
        }
        if (this.mayResendUnsent(error, options, deadline)) {
          await pauseUntil(UNSENT_PAUSE_MS, deadline);
          continue;
        }
        if (lost && error instanceof RedisUnavailableError) throw lost;
        const retry = options.idempotent && error instanceof OutcomeUnknownError && !this.closed && Date.now() < deadline;
        if (!retry) throw error;
        lost = error;
      }
    }
  }

  /**
   * Whether a call ioredis refused to send (its socket had just died: nothing was sent) goes
   * out again, after the reconnect: any call may, since its first send is still to come — but
   * not past the deadline, after close, or at bootstrap (failFast gives up at the first error).
   */
  private mayResendUnsent(error: unknown, options: CallOptions, deadline: number): boolean {
    return error instanceof RedisUnavailableError && !options.failFast && !this.closed && Date.now() < deadline;
  }

  /** Fails every call waiting on or in flight over this link with `error` (e.g. a worker that stops). */
  abortAll(error: Error): void {
    [...this.waiting].forEach((waiter) => waiter.fail(error));
    this.inflight.forEach((calls) => [...calls].forEach((call) => call.fail(error)));
  }

  /**
   * Drops the current connection (its calls fail as lost); the next call opens a new one.
   * `expected`: a deliberate drop (e.g. a worker stopping), not worth a warning.
   */
  replace(reason: string, expected = false): void {
    if (this.instance) this.recycle(this.instance, reason, expected);
  }

  /**
   * Moves the next calls to a new connection and closes the current one once the calls sent over
   * it have their replies: on a cluster, when the namespace's slot moved to another node. A call
   * already sent to the old node gets a `MOVED` reply there (nothing ran) and is sent again.
   */
  retire(): void {
    const redis = this.instance;
    if (!redis || this.closed) return;
    this.instance = undefined;
    if (this.inflight.get(redis)?.size) this.retired.add(redis);
    else this.drop(redis);
    // Someone may be subscribed or blocked over the old connection: they carry on over the new one.
    this.client.connect().catch(() => undefined);
  }

  /**
   * Fails the calls in flight over `redis` as redirected (nothing ran), so they are sent again:
   * ioredis never settles a subscribe that a node answered with `MOVED` (it only emits 'moved').
   */
  redirectInflight(redis: Redis, reason: string): void {
    this.inflight.get(redis)?.forEach((call) => call.fail(new ClusterRedirect(reason, redis)));
  }

  /** Closes the connection within about a second, whatever state Redis is in. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    this.abortAll(new SluiceError(`QueueModule is shutting down; its Redis ${this.role} connection is closing`));
    [...this.retired].forEach((redis) => this.drop(redis));
    const redis = this.instance;
    this.instance = undefined;
    if (!redis) return;
    let timer: NodeJS.Timeout | undefined;
    const quit = redis.status === 'ready' ? redis.quit().then(() => undefined, () => undefined) : Promise.resolve();
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
      [...this.waiting].forEach((waiter) => waiter.ready(redis));
    });
    redis.on('error', (error: Error) => {
      if (this.instance !== redis || isSlotLeftPush(error)) return;
      this.lastError = error.message;
      this.downAt ??= Date.now();
      // Every reconnect attempt of an outage fails like this: one line, then summaries.
      this.outage.warn(`Redis ${this.role} connection down: ${error.message}; reconnecting (repeats are summarised)`);
      [...this.waiting].filter((waiter) => waiter.failFast).forEach((waiter) => waiter.fail(this.unavailable(waiter.operation)));
    });
    redis.on('close', () => {
      if (this.instance === redis) {
        if (this.lastError === 'not connected yet') this.lastError = 'connection closed';
        // A close alone (CLIENT KILL, a restart) is not logged: a reconnect that works at once
        // is no news. Its reconnect attempts' errors are.
        this.downAt ??= Date.now();
      }
      this.inflight.get(redis)?.forEach((call) => call.lost('the connection closed before the reply'));
      // A retired connection is not reconnected (that would look the owner up and subscribe again).
      if (this.retired.has(redis)) this.drop(redis);
    });
    this.hooks.forEach((hook) => hook(redis));
    return redis;
  }

  private whenReady(operation: string, deadline: number, failFast = false): Promise<Redis> {
    const redis = this.client;
    if (canSend(redis)) return Promise.resolve(redis);
    if (redis.status === 'wait' || redis.status === 'end') redis.connect().catch(() => undefined);
    return new Promise((resolve, reject) => {
      const settle = (fn: () => void) => {
        clearTimeout(timer);
        this.waiting.delete(waiter);
        fn();
      };
      const waiter: Waiter = {
        operation,
        failFast,
        ready: (ready) => settle(() => resolve(ready)),
        fail: (error) => settle(() => reject(error)),
      };
      const timer = setTimeout(() => waiter.fail(this.unavailable(operation)), Math.max(0, deadline - Date.now()));
      this.waiting.add(waiter);
    });
  }

  /** @param retry whether an earlier try of this call lost its reply (a script may look for its effects). */
  private send<T>(operation: string, redis: Redis, send: (redis: Redis, retry: boolean) => Promise<T>, deadline: number, retry: boolean): Promise<T> {
    let calls = this.inflight.get(redis);
    if (!calls) this.inflight.set(redis, (calls = new Set()));
    const set = calls;
    this.sweeper ??= setInterval(() => this.sweep(), SWEEP_MS).unref();
    return new Promise<T>((resolve, reject) => {
      const call: InFlight = {
        deadline,
        operation,
        lost: (reason) => set.delete(call) && reject(new OutcomeUnknownError(operation, `${reason}; the call may or may not have taken effect`)),
        fail: (error) => set.delete(call) && reject(error),
      };
      set.add(call);
      let sent: Promise<T>;
      try {
        sent = send(redis, retry);
      } catch (error) {
        sent = Promise.reject(error);
      }
      sent.then(
        (value) => set.delete(call) && resolve(value),
        (error: Error) => set.delete(call) && reject(this.classify(operation, error, redis)),
      );
    });
  }

  /**
   * Fails the calls whose reply is overdue and replaces their connection. One sweep for all calls,
   * rather than a timer per call, keeps the common path cheap; bounds are seconds, so a tenth of
   * a second of slack is immaterial.
   */
  private sweep(): void {
    const now = Date.now();
    for (const [redis, calls] of this.inflight) {
      if (calls.size === 0 && this.retired.has(redis)) this.drop(redis);
      const overdue = [...calls].find((call) => call.deadline <= now);
      if (!overdue) continue;
      const reason = `no reply to ${overdue.operation} in time`;
      [...calls].filter((call) => call.deadline <= now).forEach((call) => call.lost(reason));
      this.recycle(redis, reason);
    }
  }

  private classify(operation: string, error: Error, redis: Redis): Error {
    if (error instanceof SluiceError || error instanceof ClusterRedirect) return error;
    const redirect = this.redirects && clusterRedirect(error, redis);
    if (redirect) return redirect;
    if (error?.name === 'ReplyError') return new RedisCommandError(operation, error);
    if (/enableOfflineQueue|Connection is closed/.test(error?.message ?? '')) return this.unavailable(operation);
    return new OutcomeUnknownError(operation, `${error?.message ?? error}; the call may or may not have taken effect`, { cause: error });
  }

  private unavailable(operation: string): RedisUnavailableError {
    return new RedisUnavailableError(operation, `Redis ${this.role} connection not ready in time (${this.lastError}); nothing was sent`);
  }

  /** Replaces an instance that stopped answering: its socket may never close, so it is destroyed. */
  private recycle(redis: Redis, reason: string, expected = false): void {
    this.inflight.get(redis)?.forEach((call) => call.lost('the connection was replaced before the reply'));
    this.inflight.delete(redis);
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

  private drop(redis: Redis): void {
    this.retired.delete(redis);
    this.inflight.delete(redis);
    destroy(redis);
  }
}

function destroy(redis: Redis): void {
  redis.disconnect();
  (redis as unknown as { stream?: { destroy?: () => void } }).stream?.destroy?.();
}
