import type { Cluster, Redis } from 'ioredis';
import { isCluster, serverNodes } from './nodes';

/**
 * SCAN … MATCH over a whole deployment: the one server, or every master of a Redis Cluster (SCAN
 * on a Cluster client would ask one node at random and miss the keys of the others). `onPage`
 * gets each page of keys with the connection of the node holding them, so it can act on them
 * there (a node refuses keys of slots it does not serve). Test-only: never on a hot path.
 */
export async function scanEach(
  redis: Redis | Cluster,
  pattern: string,
  onPage: (keys: string[], node: Redis) => Promise<void> | void,
): Promise<void> {
  for (const node of await serverNodes(redis)) {
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

export { isCluster };
