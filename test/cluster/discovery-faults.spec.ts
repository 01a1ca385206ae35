import 'reflect-metadata';
import { createServer, type Server, type Socket } from 'node:net';
import { RedisUnavailableError, Workflow } from '../../lib';
import { createApp, testCluster, type TestApp, uniqueNamespace } from '../support/app';

@Workflow('discovery.w')
class DiscoveryWorkflow {
  async run(input: { n: number }): Promise<number> {
    return input.n + 1;
  }
}

/** A seed that accepts connections and never answers: a node hung or behind a dead network. */
async function blackHole(): Promise<{ server: Server; seed: { host: string; port: number } }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('close', () => sockets.forEach((socket) => socket.destroy()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return { server, seed: { host: '127.0.0.1', port: address.port } };
}

/**
 * Finding the namespace's master is a Redis call too: a seed that never answers must not hang it.
 * Each seed's lookup is bounded (2 s); the next seed is asked; with none answering, calls fail
 * with RedisUnavailableError within their bound, and the app still closes.
 */
describe('Redis Cluster: discovery when seeds do not answer', () => {
  const servers: Server[] = [];
  let app: TestApp | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(() => servers.forEach((server) => server.close()));

  it('skips a seed that never answers and a refused one, and finds the master through the next', async () => {
    const hole = await blackHole();
    servers.push(hole.server);
    const refused = await blackHole();
    refused.server.close();
    const seeds = [hole.seed, refused.seed, ...testCluster()!];
    app = await createApp([DiscoveryWorkflow], { namespace: uniqueNamespace('discovery'), connection: { cluster: seeds } });
    await expect(app.client.run(DiscoveryWorkflow, { n: 41 }, { timeoutMs: 15_000 })).resolves.toBe(42);
  });

  it('with no seed answering, a call rejects with RedisUnavailableError within its bound, and the app closes', async () => {
    const holes = await Promise.all([blackHole(), blackHole()]);
    holes.forEach(({ server }) => servers.push(server));
    app = await createApp([DiscoveryWorkflow], {
      namespace: uniqueNamespace('discovery'),
      connection: { cluster: holes.map(({ seed }) => seed) },
      redisTimeoutMs: 3_000,
      worker: { enabled: false },
    });
    const error = await app.client.get('r-1').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect((error as Error).message).toMatch(/not ready in time/);
    await app.close();
    app = undefined;
  });
});
