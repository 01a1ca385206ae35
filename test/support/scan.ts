import { once } from 'node:events';
import type { Cluster, Redis } from 'ioredis';

/**
 * SCAN … MATCH over a whole deployment: the one server, or every master of a Redis Cluster (SCAN
 * on a Cluster client would ask one node at random and miss the keys of the others). `onPage`
 * gets each page of keys with the connection of the node holding them, so it can act on them
 * there (a node refuses keys of slots it does not serve). Test-only: never on a hot path.
 */
export async function scanEach(redis: Redis | Cluster, pattern: string, onPage: (keys: string[], node: Redis) => Promise<void> | void): Promise<void> {
  for (const node of await nodesToScan(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      if (keys.length) await onPage(keys, node);
      cursor = next;
    } while (cursor !== '0');
  }
}

/** Every key matching `pattern` (see {@link scanEach}); may repeat a key (SCAN does). */
export async function scanKeys(redis: Redis | Cluster, pattern: string): Promise<string[]> {
  const found: string[] = [];
  await scanEach(redis, pattern, (keys) => void found.push(...keys));
  return found;
}

export function isCluster(redis: Redis | Cluster): redis is Cluster {
  return (redis as Cluster).isCluster === true;
}

async function nodesToScan(redis: Redis | Cluster): Promise<Redis[]> {
  if (!isCluster(redis)) return [redis];
  // nodes() lists only the nodes of a loaded slot map: empty until the client is ready.
  if (redis.status === 'wait') await redis.connect();
  else if (redis.status !== 'ready') await once(redis, 'ready');
  return redis.nodes('master');
}
