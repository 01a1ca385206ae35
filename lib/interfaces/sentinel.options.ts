import type { Redis, RedisOptions } from 'ioredis';
import { QueueConfigError } from '../errors';
import { checkOptionKeys } from '../util/option-keys';
import { userRedisInstance } from './user-instance';
import { checkAddress, checkCredentials } from './connection.checks';

/** One Redis Sentinel Sluice may ask where the primary is. */
export interface SentinelAddress {
  /** The sentinel's host name or IP address. */
  host: string;
  /** The sentinel's port, usually 26379. */
  port: number;
}

/**
 * A primary with replicas behind Redis Sentinel: the sentinels to ask (more than one, so that
 * discovery survives one being down), the name of the primary they watch, and what the
 * connection to the primary needs. Every Sluice connection goes to the primary and follows it
 * through a failover; replicas are never read (docs/connections.md).
 */
export interface RedisSentinelConnectionOptions {
  /** The sentinels to ask, at least one. */
  sentinels: SentinelAddress[];
  /** The primary's name in the sentinels' configuration (`sentinel monitor <name> …`). */
  name: string;
  /** ACL user and password of the data nodes (the primary and its replicas). */
  username?: string;
  /** Password of the data nodes' ACL user (or of their `requirepass`). */
  password?: string;
  /** Database number on the primary; default 0. */
  db?: number;
  /** TLS to the data nodes: `true` for default settings, or Node TLS options. */
  tls?: boolean | RedisOptions['tls'];
  /** ACL user and password of the sentinels, when they require one. */
  sentinelUsername?: string;
  /** Password of the sentinels' ACL user (or of their `requirepass`). */
  sentinelPassword?: string;
  /** TLS to the sentinels: `true` for default settings, or Node TLS options. */
  sentinelTls?: boolean | RedisOptions['tls'];
}

const SENTINEL_OPTIONS: readonly string[] = [
  'sentinels',
  'name',
  'username',
  'password',
  'db',
  'tls',
  'sentinelUsername',
  'sentinelPassword',
  'sentinelTls',
];

/** Sentinel options (an ioredis instance is told apart by its methods, see userRedisInstance). */
export function isSentinelOptions(connection: unknown): connection is RedisSentinelConnectionOptions {
  return typeof connection === 'object' && connection !== null && 'sentinels' in connection && !userRedisInstance(connection);
}

/** Whether an ioredis instance given as `connection` was made for Sentinel. */
export function isSentinelInstance(redis: Redis): boolean {
  return Array.isArray(redis.options.sentinels) && redis.options.sentinels.length > 0;
}

/**
 * Checks Sentinel options (typed errors, before any I/O) and returns ioredis's fields for them.
 * @throws QueueConfigError or InvalidOptionError naming the field
 */
export function sentinelFields(connection: RedisSentinelConnectionOptions): RedisOptions {
  checkOptionKeys(connection, SENTINEL_OPTIONS, 'QueueModule options.connection');
  const { sentinels, name, username, password, db, tls, sentinelUsername, sentinelPassword, sentinelTls } = connection;
  if (!Array.isArray(sentinels) || sentinels.length === 0)
    throw new QueueConfigError('options.connection.sentinels must be a non-empty array of { host, port } sentinels');
  const addresses = sentinels.map((sentinel, index) => {
    checkOptionKeys(sentinel, ['host', 'port'], `QueueModule options.connection.sentinels[${index}]`);
    return checkAddress(sentinel, `options.connection.sentinels[${index}]`);
  });
  if (typeof name !== 'string' || name === '')
    throw new QueueConfigError("options.connection.name must be the primary's name the sentinels monitor (`sentinel monitor <name> …`)");
  if (db !== undefined && (!Number.isInteger(db) || db < 0)) throw new QueueConfigError('options.connection.db must be an integer ≥ 0');
  checkCredentials({ username, password, sentinelUsername, sentinelPassword });
  return {
    sentinels: addresses,
    name,
    // Never a replica: a replica's state lags the primary's, and Sluice's reads decide claims.
    role: 'master',
    ...(username !== undefined && { username }),
    ...(password !== undefined && { password }),
    ...(db !== undefined && { db }),
    // ioredis applies `tls` to the data nodes in Sentinel mode only with enableTLSForSentinelMode.
    ...(tls && { tls: tls === true ? {} : tls, enableTLSForSentinelMode: true }),
    ...(sentinelUsername !== undefined && { sentinelUsername }),
    ...(sentinelPassword !== undefined && { sentinelPassword }),
    ...(sentinelTls && { sentinelTLS: sentinelTls === true ? {} : sentinelTls }),
  };
}

/**
 * What every Sentinel connection of Sluice adds to its settings: it listens for the sentinels'
 * `+switch-master` and reconnects at once (to the new primary) rather than at its next error.
 */
export const SENTINEL_TUNING: RedisOptions = { failoverDetector: true };

/** Whether the connection option goes through Redis Sentinel (Sentinel options, or an ioredis instance made for it). */
export function throughSentinel(connection: unknown): boolean {
  const user = userRedisInstance(connection);
  return user ? isSentinelInstance(user) : isSentinelOptions(connection);
}

/**
 * A `READONLY` reply means the node was demoted (a Sentinel failover, or a managed service's
 * behind a DNS name): reconnecting reaches the primary again. ioredis does not resend the refused
 * command (a script must not be sent twice blindly): Sluice's link sends it again, since a
 * `READONLY` refusal ran nothing (see RedisLink).
 */
export function reconnectWhenDemoted(error: Error): 1 | false {
  return /^READONLY /.test(error.message) ? 1 : false;
}
