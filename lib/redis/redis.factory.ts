import IORedis, { Redis, RedisOptions } from 'ioredis';
import type { RedisConnectionOptions, ResolvedQueueOptions } from '../interfaces/queue.options';
import { RedisLink, type Role } from './redis.link';
import { userRedisInstance } from '../interfaces/user-instance';
import { jitteredPause } from '../util/retry';
import type { OutageLogger } from '../util/outage-log';
import { CLASSIC_CHANNELS, SHARDED_CHANNELS, type Channels } from './pubsub.channels';
import { SlotOwner } from './cluster/slot-owner';
import { slotOwnerConnector } from './cluster/slot-owner.connector';
import { keySlot } from './cluster/key-slot';
import { RedisKeys } from './redis.keys';
import { LinkSiblings } from './link.siblings';
import { isSentinelInstance, reconnectWhenDemoted, SENTINEL_TUNING } from '../interfaces/sentinel.options';
import { ConnectionNames } from './link.names';

type EndpointOptions = Pick<ResolvedQueueOptions, 'connection' | 'cluster' | 'sentinel' | 'namespace' | 'prefix' | 'redisTimeoutMs'>;

/**
 * Where Sluice's connections go: one Redis server, or — on a Redis Cluster — the master that owns
 * the namespace's slot, followed through resharding and failover ({@link SlotOwner}). Either
 * way a process opens one connection per role, however large the cluster.
 */
export class RedisEndpoint {
  /** On a cluster: the namespace slot's owner. */
  readonly owner?: SlotOwner;
  /** The links made here: the first one ready after an outage has the others reconnect at once. */
  private readonly siblings = new LinkSiblings();
  /** Names the links' connections; a refusal is said once for them all. */
  private names?: ConnectionNames;

  constructor(private readonly options: EndpointOptions) {
    if (options.cluster)
      this.owner = new SlotOwner(options.cluster, keySlot(new RedisKeys(options.prefix, options.namespace).base), options.redisTimeoutMs);
  }

  /** How the namespace's channels are subscribed to: sharded on a cluster, so only its shard carries them. */
  get channels(): Channels {
    return this.owner ? SHARDED_CHANNELS : CLASSIC_CHANNELS;
  }

  link(role: Role, logger: OutageLogger): RedisLink {
    this.names ??= new ConnectionNames(`sluice:${this.options.namespace}`, logger);
    return new RedisLink(role, () => this.client(role), this.options.redisTimeoutMs, logger, this.owner, this.names, this.siblings);
  }

  private client(role: Role): Redis {
    const { cluster } = this.options;
    if (!cluster || !this.owner) return createRedisClient(this.options, role);
    const { username, password, tls } = cluster;
    // A master that died without a reset would hold a connect for the whole call bound, past its
    // replica's promotion: give up sooner, and the next attempt looks the owner up again.
    const connectTimeout = Math.min(this.options.redisTimeoutMs, CLUSTER_CONNECT_TIMEOUT_MS);
    return new IORedis({
      username,
      password,
      tls,
      ...redisTuning(this.options, role),
      connectTimeout,
      Connector: slotOwnerConnector(this.owner, tls),
    });
  }
}

/** Longest connect to a cluster node (see RedisEndpoint). */
const CLUSTER_CONNECT_TIMEOUT_MS = 2_000;

/** Longest pause between reconnect attempts: an outage is noticed over within this of its end. */
export const MAX_RECONNECT_DELAY_MS = 2_000;

/**
 * A new ioredis instance for one of Sluice's connections, with Sluice's settings (lazy, no offline
 * queue but on the subscriber, no automatic resend, bounded connect, jittered reconnects), from
 * the connection options or as a duplicate of the user's instance. Wrap it in a `RedisLink`.
 */
function createRedisClient(
  options: Pick<ResolvedQueueOptions, 'connection' | 'sentinel' | 'namespace' | 'redisTimeoutMs'>,
  role: Role,
): Redis {
  const tuning = redisTuning(options, role);
  if (options.sentinel) return new IORedis({ ...options.sentinel, ...tuning, ...SENTINEL_TUNING });
  const user = userRedisInstance(options.connection);
  // A user's instance keeps its own ready check.
  if (user)
    return user.duplicate({ ...tuning, enableReadyCheck: user.options.enableReadyCheck, ...(isSentinelInstance(user) && SENTINEL_TUNING) });
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

/** Sluice's settings for one of its connections (see {@link createRedisClient}). */
function redisTuning(options: Pick<ResolvedQueueOptions, 'redisTimeoutMs'>, role: Role): RedisOptions {
  return {
    lazyConnect: true,
    // The link names the connection (`sluice:<namespace>:<role>`), in the write of its ready
    // check (see LinkConnection); ioredis would wait for that reply first. Not the user's name either.
    connectionName: undefined,
    // No CLIENT SETINFO lib-name/lib-ver at each connect: the name says whose connection it is,
    // and the two commands (errors before Redis 7.2, counted in its errorstats) are work for
    // both sides, three times over in every worker's boot.
    disableClientInfo: true,
    // Sluice's link makes the ready check (one INFO; none on the subscriber), and the command
    // connection's INFO serves the boot's server check too (see LinkConnection).
    enableReadyCheck: false,
    // A call made while the connection is down waits for it in RedisLink (with a bound), not in
    // ioredis's offline queue, so a call that times out there is known never to have been sent.
    // The subscriber keeps the queue: subscriptions must follow their unsubscriptions in order.
    enableOfflineQueue: role === 'subscriber',
    maxRetriesPerRequest: null,
    // A script whose reply a disconnect swallowed may have run: sending it again could complete
    // or claim twice. RedisLink fails it instead; idempotent calls are retried by design.
    autoResendUnfulfilledCommands: false,
    enableAutoPipelining: false,
    // Subscriptions are made again by Sluice on 'ready', through the link: ioredis's own resubscribe
    // would neither follow a cluster's redirects nor handle its failures (an unhandled rejection).
    autoResubscribe: false,
    connectTimeout: options.redisTimeoutMs,
    // ioredis waits this long for a socket it ended to close, on a timer that keeps the process
    // alive, and never clears it for a socket that had already failed to connect: with its 2 s
    // default, an app closed during an outage would linger 2 s. Sluice quits (bounded) before it ends
    // a connection, so the socket is closed already when this matters.
    disconnectTimeout: 100,
    retryStrategy: (attempt: number) => jitteredPause(attempt, 50, MAX_RECONNECT_DELAY_MS),
    reconnectOnError: reconnectWhenDemoted,
  };
}
