import type { Redis } from 'ioredis';
import { OutcomeUnknownError, RedisCommandError, RedisUnavailableError, SluiceError } from '../errors';
import type { OutageLogger } from '../util/outage-log';
import { ClusterRedirect, clusterRedirect } from './cluster/cluster.redirects';
import { LinkConnection, type ReadyReads } from './link.connection';
import type { ConnectionNames } from './link.names';
import type { LinkSiblings } from './link.siblings';
import { type CallOptions, inOneWrite, pauseUntil, type RedirectListener, replyDeadline, type Role, type Send } from './link.options';

export type { CallOptions, RedirectListener, Role } from './link.options';

/** Pause before sending again a call a cluster refused while its slot migrates or fails over. */
const REDIRECT_PAUSE_MS = 100;
/**
 * Pause before sending again a call ioredis refused unsent: its socket died a moment ago and the
 * 'close' that starts the reconnect has yet to be handled; the pause lets it run.
 */
const UNSENT_PAUSE_MS = 10;

/** Errors of calls a server refused while it loads its data or is demoted: sent again even when fail-fast (see mayResendUnsent). */
const LOADING_REFUSALS = new WeakSet<Error>();
function refusedWhileLoading(error: RedisUnavailableError): RedisUnavailableError {
  LOADING_REFUSALS.add(error);
  return error;
}

/**
 * Replies of a node that is (or just became) a replica, refusing a call before running any of it:
 * `READONLY` (a write, or a script without the no-writes flag) and `UNBLOCKED` (a blocking read
 * ended by the demotion, having popped nothing). Behind Sentinel the connection is reconnecting to
 * the new primary by then (see SENTINEL_TUNING), so the call waits for it and goes out again.
 */
const DEMOTED_REFUSAL = /^(READONLY|UNBLOCKED) /;

/**
 * One Redis connection of a role, and the rule that no call over it can hang: every call waits at
 * most its bound for the connection to be ready ({@link RedisUnavailableError}: nothing was sent),
 * then at most its bound for the reply ({@link OutcomeUnknownError}: it may have run). A reply the
 * connection drops fails its call at once — ioredis 5 leaves such a promise pending for ever when
 * commands are not resent, and resending a script that did run could commit or claim twice. A
 * connection that stops answering (a silent network loss: no reset, so ioredis never notices) is
 * replaced whole, since the old socket may never close (see LinkConnection, InflightCalls).
 */
export class RedisLink {
  private readonly connection: LinkConnection;

  /**
   * @param redirects set on a Redis Cluster: the link then sends again the calls a node redirected (nothing ran).
   * @param names names the connection (CLIENT SETNAME) on every connect
   * @param siblings the process's other links to the same Redis: the first ready again after an outage has the others reconnect at once
   */
  constructor(
    readonly role: Role,
    create: () => Redis,
    private readonly timeoutMs: number,
    logger: OutageLogger,
    private readonly redirects?: RedirectListener,
    names?: ConnectionNames,
    siblings?: LinkSiblings,
  ) {
    this.connection = new LinkConnection(role, create, logger, timeoutMs, names, siblings);
  }

  /**
   * Since when (local clock) this link has wanted a connection and had none ready: its connection
   * closed or failed and has not been ready since. Undefined while it is ready, and while it is
   * idle with no connection (never used, or replaced with no call waiting): a link nobody needs
   * is not down. Health uses it to see a worker whose blocking connection cannot come back.
   */
  get downSince(): number | undefined {
    return this.connection.downSince;
  }

  /** Why its connection was last down or refused calls (what {@link downSince} dates), for health reports. */
  get downReason(): string {
    return this.connection.lastDownReason;
  }

  /** Whether the link has a connection (in any state): after a replacement it has none until the next call. */
  get hasConnection(): boolean {
    return this.connection.instance !== undefined && !this.connection.closed;
  }

  /** The current ioredis instance, created (not connected) on first use. */
  get client(): Redis {
    return this.connection.client;
  }

  /**
   * A reply to what `redis`'s first ready check sent for the boot's server check (its `INFO`, or
   * its `CONFIG GET save`), once; undefined when that check sent none (a user's instance, checked
   * by ioredis) or it was taken already. See LinkConnection.takeReadyRead.
   */
  takeReadyRead<K extends 'info' | 'save'>(redis: Redis, read: K): ReadyReads[K] | undefined {
    return this.connection.takeReadyRead(redis, read);
  }

  /**
   * Connects now, if the link has no connection open or opening: for a caller that will need it in
   * a moment, so its handshake overlaps other work instead of delaying the first call.
   */
  open(): void {
    this.connection.open();
  }

  /** Runs `hook` on every instance this link creates (now, if one exists): listeners, script definitions. */
  onCreate(hook: (redis: Redis) => void): void {
    this.connection.onCreate(hook);
  }

  /**
   * Runs `calls`, and the calls it makes synchronously over a ready connection leave in one socket
   * write (independent calls sent together, e.g. a worker's bootstrap declarations). Their
   * bounds and outcomes are each their own.
   */
  together<T>(calls: () => T): T {
    const redis = this.connection.instance;
    return redis && this.connection.usable(redis) ? inOneWrite(redis, calls) : calls();
  }

  /** Sends one call under the link's bounds; see {@link CallOptions}. */
  call<T>(operation: string, send: Send<T>, options: CallOptions = {}): Promise<T> {
    const deadline = Date.now() + (options.timeoutMs ?? this.timeoutMs);
    const redis = this.connection.instance;
    if (!redis || !this.connection.usable(redis) || this.connection.closed) return this.attempts(operation, send, options, deadline);
    // The common case, kept lean (it runs for every command): the connection is up, send now.
    return this.send(operation, redis, send, replyDeadline(deadline, options), false).catch((error: Error) =>
      this.retry(error, operation, send, options, deadline),
    );
  }

  /** Fails every call waiting on or in flight over this link with `error` (e.g. a worker that stops). */
  abortAll(error: Error): void {
    this.connection.waiting.failAll(error);
    this.connection.calls.failAll(error);
  }

  /**
   * Drops the current connection (its calls fail as lost); the next call opens a new one.
   * `expected`: a deliberate drop (e.g. a worker stopping), not worth a warning.
   */
  replace(reason: string, expected = false): void {
    if (this.connection.instance) this.connection.recycle(this.connection.instance, reason, expected);
  }

  /**
   * Moves the next calls to a new connection and closes the current one once the calls sent over
   * it have their replies: on a cluster, when the namespace's slot moved to another node. A call
   * already sent to the old node gets a `MOVED` reply there (nothing ran) and is sent again.
   */
  retire(): void {
    this.connection.retire();
  }

  /**
   * Fails the calls in flight over `redis` as redirected (nothing ran), so they are sent again:
   * ioredis never settles a subscribe that a node answered with `MOVED` (it only emits 'moved').
   */
  redirectInflight(redis: Redis, reason: string): void {
    this.connection.calls.failOn(redis, () => new ClusterRedirect(reason, redis));
  }

  /** Closes the connection within about a second, whatever state Redis is in. */
  close(): Promise<void> {
    return this.connection.close();
  }

  private async retry<T>(error: Error, operation: string, send: Send<T>, options: CallOptions, deadline: number): Promise<T> {
    if (error instanceof ClusterRedirect) {
      await this.follow(error, operation, deadline);
      return this.attempts(operation, send, options, deadline);
    }
    if (this.mayResendUnsent(error, options, deadline)) {
      await pauseUntil(UNSENT_PAUSE_MS, deadline);
      return this.attempts(operation, send, options, deadline);
    }
    if (!options.idempotent || !(error instanceof OutcomeUnknownError) || this.connection.closed || Date.now() >= deadline) throw error;
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
      if (redirect.connection === this.connection.instance) this.retire();
    }
    const pause = redirect.movedTo ? 0 : Math.min(REDIRECT_PAUSE_MS, deadline - Date.now());
    if (pause < 0 || this.connection.closed || Date.now() >= deadline) {
      throw (
        lost ??
        new RedisUnavailableError(
          operation,
          `Redis Cluster still answered "${redirect.message}" at the call's deadline; nothing was sent that ran`,
        )
      );
    }
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
  }

  /** Waits for the connection, sends, and (if idempotent) sends again after a lost reply, until the deadline. */
  private async attempts<T>(
    operation: string,
    send: Send<T>,
    options: CallOptions,
    deadline: number,
    lost?: OutcomeUnknownError,
  ): Promise<T> {
    for (;;) {
      let redis: Redis;
      try {
        redis = await this.connection.whenReady(operation, deadline, options.failFast);
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
        const retry = options.idempotent && error instanceof OutcomeUnknownError && !this.connection.closed && Date.now() < deadline;
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
    if (!(error instanceof RedisUnavailableError) || this.connection.closed || Date.now() >= deadline) return false;
    // A server that answers is no connection error: even a fail-fast call waits for its load.
    return !options.failFast || LOADING_REFUSALS.has(error);
  }

  /** @param retry whether an earlier try of this call lost its reply (a script may look for its effects). */
  private send<T>(operation: string, redis: Redis, send: Send<T>, deadline: number, retry: boolean): Promise<T> {
    return this.connection.calls.send(operation, redis, send, deadline, retry, this.classify);
  }

  private readonly classify = (operation: string, error: Error, redis: Redis): Error => {
    if (error instanceof SluiceError || error instanceof ClusterRedirect) return error;
    const redirect = this.redirects && clusterRedirect(error, redis);
    if (redirect) return redirect;
    // Refused while the server loads its data (a call sent with the ready check, see
    // LinkConnection): nothing ran, so it goes out again once the connection is ready.
    if (error?.name === 'ReplyError' && (error.message.startsWith('LOADING') || DEMOTED_REFUSAL.test(error.message))) {
      this.connection.noteRefusal(error.message);
      return refusedWhileLoading(this.connection.unavailable(operation));
    }
    if (error?.name === 'ReplyError') return new RedisCommandError(operation, error);
    if (/enableOfflineQueue|Connection is closed/.test(error?.message ?? '')) return this.connection.unavailable(operation);
    return new OutcomeUnknownError(operation, `${error?.message ?? error}; the call may or may not have taken effect`, { cause: error });
  };
}
