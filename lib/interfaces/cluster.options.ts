import type { Cluster, NatMap, RedisOptions } from 'ioredis';
import { QueueConfigError } from '../errors';
import { checkOptionKeys } from '../util/option-keys';
import { checkAddress, checkCredentials } from './connection.checks';

/** One node Sluice may ask for the cluster's slot map. */
export interface ClusterSeed {
  /** The node's host name or IP address. */
  host: string;
  /** The node's port, e.g. 7000. */
  port: number;
}

/**
 * A Redis Cluster: seed nodes (any of its nodes; more than one so that discovery survives one
 * being down) and what every connection to a node needs. Sluice connects only to the master that
 * owns the namespace's slot and follows it through resharding and failover (docs/connections.md).
 */
export interface RedisClusterConnectionOptions {
  /** The seed nodes, at least one. */
  cluster: ClusterSeed[];
  /** ACL user of every node; without it, the `default` user. */
  username?: string;
  /** Password of the ACL user (or of `requirepass`) on every node. */
  password?: string;
  /** `true` for TLS with default settings, or Node TLS options. */
  tls?: boolean | RedisOptions['tls'];
  /** Maps the `host:port` a node announces to the address to reach it at (NAT, containers): ioredis's `natMap`, an object or a function. */
  natMap?: NatMap;
}

const CLUSTER_OPTIONS: readonly string[] = ['cluster', 'username', 'password', 'tls', 'natMap'];

/** What Sluice connects to a cluster with, from the options or an ioredis `Cluster` instance. */
export interface ClusterSettings {
  seeds: ClusterSeed[];
  username?: string;
  password?: string;
  tls?: RedisOptions['tls'];
  natMap?: NatMap;
}

/** Cluster options (an ioredis `Redis` instance has a `cluster` method, not a seed list). */
export function isClusterOptions(connection: unknown): connection is RedisClusterConnectionOptions {
  return typeof connection === 'object' && connection !== null && 'cluster' in connection && typeof connection.cluster !== 'function';
}

/** An ioredis `Cluster` given as `connection`. */
export function userClusterInstance(connection: unknown): Cluster | undefined {
  return typeof connection === 'object' && connection !== null && (connection as { isCluster?: boolean }).isCluster === true
    ? (connection as Cluster)
    : undefined;
}

/** Checks and normalises a cluster connection (typed errors, before any I/O); undefined when `connection` is not one. */
export function clusterSettings(connection: unknown): ClusterSettings | undefined {
  const instance = userClusterInstance(connection);
  if (instance) return fromInstance(instance);
  if (!isClusterOptions(connection)) return undefined;
  // A shape of Sluice's own (its `tls` and `natMap` values are ioredis's, passed on as they are).
  checkOptionKeys(connection, CLUSTER_OPTIONS, 'QueueModule options.connection');
  const { cluster, username, password, tls, natMap } = connection;
  if (!Array.isArray(cluster) || cluster.length === 0)
    throw new QueueConfigError('options.connection.cluster must be a non-empty array of { host, port } seed nodes');
  const seeds = cluster.map((seed, index) => {
    if (seed !== null && typeof seed === 'object')
      checkOptionKeys(seed, ['host', 'port'], `QueueModule options.connection.cluster[${index}]`);
    return checkAddress(seed, `options.connection.cluster[${index}]`);
  });
  checkCredentials({ username, password });
  return { seeds, username, password, tls: tls === true ? {} : tls || undefined, natMap: natMap && checkNatMap(natMap) };
}

/**
 * Sluice reads an instance's seeds and node options and opens connections of its own: it never
 * sends a command over the instance (whose offline queue and resends would break Sluice's
 * bounds) and leaves closing it to the caller.
 */
function fromInstance(instance: Cluster): ClusterSettings {
  const internals = instance as unknown as { startupNodes?: unknown[]; options?: { redisOptions?: RedisOptions; natMap?: NatMap } };
  const seeds = (internals.startupNodes ?? []).map((node, index) =>
    checkAddress(toSeed(node), `the Cluster instance's startup node ${index}`),
  );
  if (seeds.length === 0) throw new QueueConfigError('options.connection: the ioredis Cluster instance has no startup nodes');
  const node = internals.options?.redisOptions ?? {};
  if (node.keyPrefix)
    throw new QueueConfigError(
      `options.connection: a Cluster instance with keyPrefix "${node.keyPrefix}" is not supported; use the prefix option instead`,
    );
  return { seeds, username: node.username, password: node.password, tls: node.tls, natMap: internals.options?.natMap };
}

function toSeed(node: unknown): unknown {
  if (typeof node === 'number') return { host: '127.0.0.1', port: node };
  if (typeof node !== 'string') return node;
  const url = /^rediss?:\/\//.test(node) ? new URL(node) : new URL(`redis://${node}`);
  return { host: url.hostname || '127.0.0.1', port: Number(url.port || 6379) };
}

function checkNatMap(natMap: unknown): NatMap {
  if (typeof natMap === 'function') return natMap as NatMap;
  if (typeof natMap !== 'object' || natMap === null)
    throw new QueueConfigError('options.connection.natMap must be an object of "host:port" → { host, port }, or a function');
  for (const [from, to] of Object.entries(natMap)) checkAddress(to, `options.connection.natMap["${from}"]`);
  return natMap as NatMap;
}
