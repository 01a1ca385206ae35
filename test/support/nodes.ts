import { once } from 'node:events';
import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';

/**
 * The servers behind a test's raw connection (see rawRedis in ./app): the one server, or the
 * masters of a Redis Cluster. Commands without keys (CLIENT LIST, MONITOR, CONFIG, PUBSUB,
 * SPUBLISH, SCAN…) sent over an ioredis Cluster go to one node at random; these helpers pick the
 * node(s) they are about. On a single server each returns the connection it was given, so a
 * helper built on them behaves there exactly as before. Test-only: never on a hot path.
 */

export function isCluster(redis: Redis | Cluster): redis is Cluster {
  return (redis as Cluster).isCluster === true;
}

/** Every server of the deployment: the one server, or every master of the cluster. */
export async function serverNodes(redis: Redis | Cluster): Promise<Redis[]> {
  if (!isCluster(redis)) return [redis];
  await clusterReady(redis);
  return redis.nodes('master');
}

/**
 * The server holding `key` (or channel: a sharded channel lives in its name's slot, as a key
 * does): the one server, or the master serving the key's slot. Sluice connects only there, so
 * this is the node that sees its commands, connections, subscriptions and keyspace events.
 */
export async function nodeFor(redis: Redis | Cluster, key: string): Promise<Redis> {
  if (!isCluster(redis)) return redis;
  await clusterReady(redis);
  const owner = redis.slots[calculateSlot(key)]?.[0];
  const node = redis.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === owner);
  if (!node) throw new Error(`no master of the test cluster serves the slot of ${key} (slot map: ${owner ?? 'none'})`);
  return node;
}

/** The server holding a namespace's keys (see {@link nodeFor}). */
export function namespaceNode(redis: Redis | Cluster, namespace: string, prefix = 'sluice'): Promise<Redis> {
  return nodeFor(redis, `{${prefix}:${namespace}}`);
}

/** nodes() and slots list only the nodes of a loaded slot map: empty until the client is ready. */
async function clusterReady(redis: Cluster): Promise<void> {
  if (redis.status === 'ready') return;
  if (redis.status === 'wait') await redis.connect();
  else await once(redis, 'ready');
}
