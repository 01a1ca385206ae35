import type Redis from 'ioredis';
import { serverNodes } from './nodes';

/**
 * Names of the connections Sluice opened for `namespace` (CLIENT SETNAME `sluice:<ns>:<role>`),
 * from CLIENT LIST of the server, or of every master of a cluster: all it opened, on any node.
 */
export async function sluiceConnectionNames(redis: Redis, namespace: string): Promise<string[]> {
  const lists = await Promise.all((await serverNodes(redis)).map(async (node) => (await node.client('LIST')) as string));
  const prefix = `sluice:${namespace}:`;
  return lists
    .join('\n')
    .split('\n')
    .map((line) => /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '')
    .filter((name) => name.startsWith(prefix))
    .sort();
}

/**
 * Polls CLIENT LIST until `ready(names)` holds or `timeoutMs` passes (connections open lazily and
 * asynchronously, and no event tells a test when), then returns the latest names.
 */
export async function connectionNamesWhen(
  redis: Redis,
  namespace: string,
  ready: (names: string[]) => boolean,
  timeoutMs = 5_000,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let names = await sluiceConnectionNames(redis, namespace);
  while (!ready(names) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    names = await sluiceConnectionNames(redis, namespace);
  }
  return names;
}
