import 'reflect-metadata';
import { DynamicModule, INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import Redis, { Cluster } from 'ioredis';
import { QueueClient, QueueModule, Workflow } from '../../lib';
import { testCluster } from '../support/app';
import { namespaceSlot } from '../support/redis-cluster';

@Workflow('tier.order')
class TierOrderWorkflow {
  async run(input: { orderId: number }): Promise<string> {
    return `fulfilled ${input.orderId}`;
  }
}

/** The router of docs/connections.md, as written there ("Scaling out"): one application context per namespace. */
@Module({})
class TierQueueModule {
  static for(namespace: string, connection: unknown, worker: boolean): DynamicModule {
    return {
      module: TierQueueModule,
      imports: [QueueModule.forRoot({ connection: connection as never, namespace, worker: { enabled: worker } })],
      providers: worker ? [TierOrderWorkflow] : [],
    };
  }
}

/** Masters by port, with the slot ranges they serve (from CLUSTER SLOTS of a seed). */
async function mastersOf(seed: { host: string; port: number }): Promise<Map<number, Array<[number, number]>>> {
  const admin = new Redis(seed.port, seed.host);
  try {
    const ranges = (await admin.cluster('SLOTS')) as unknown as Array<[number, number, [string, number]]>;
    const masters = new Map<number, Array<[number, number]>>();
    for (const [start, end, [, port]] of ranges) masters.set(port, [...(masters.get(port) ?? []), [start, end]]);
    return masters;
  } finally {
    admin.disconnect();
  }
}

/**
 * Spread by namespace: three namespaces, one on each master of the shared cluster, fed by one
 * producer process through that router, each drained by its own worker context (one
 * given an ioredis Cluster instance). Each namespace's keys and connections stay on its master.
 */
describe('Redis Cluster: namespaces spread over the shards', () => {
  const contexts: INestApplicationContext[] = [];
  afterAll(() => Promise.all(contexts.map((context) => context.close())));

  it('routes each tier to its own shard, and every tier completes its runs there', async () => {
    const seeds = testCluster()!;
    const masters = await mastersOf(seeds[0]);
    expect(masters.size).toBe(3);
    const tiers = new Map<string, number>(); // namespace → the master port serving it
    for (const [port, ranges] of masters) {
      for (let i = 0; ; i++) {
        const namespace = `orders-tier${port}-${i}`;
        const slot = namespaceSlot(namespace);
        if (ranges.some(([start, end]) => start <= slot && slot <= end)) {
          tiers.set(namespace, port);
          break;
        }
      }
    }
    const instance = new Cluster(seeds, { lazyConnect: true });
    const clients = new Map<string, QueueClient>();
    for (const [index, namespace] of [...tiers.keys()].entries()) {
      // The first tier's workers are given an ioredis Cluster instance instead of seed options.
      const workerConnection = index === 0 ? instance : { cluster: seeds };
      contexts.push(await NestFactory.createApplicationContext(TierQueueModule.for(namespace, workerConnection, true), { logger: false }));
      const producer = await NestFactory.createApplicationContext(TierQueueModule.for(namespace, { cluster: seeds }, false), {
        logger: false,
      });
      contexts.push(producer);
      clients.set(namespace, producer.get(QueueClient));
    }

    const handles = await Promise.all(
      Array.from({ length: 300 }, (_, orderId) => {
        const namespace = [...tiers.keys()][orderId % 3];
        return clients
          .get(namespace)!
          .enqueue('tier.order', { orderId })
          .then((handle) => ({ namespace, orderId, handle }));
      }),
    );
    const results = await Promise.all(handles.map(({ handle }) => handle.result({ timeoutMs: 20_000 })));
    expect(results).toEqual(handles.map(({ orderId }) => `fulfilled ${orderId}`));

    for (const [namespace, port] of tiers) {
      const node = new Redis(port, '127.0.0.1');
      try {
        // The namespace's keys are on its master, and its processes' connections too: none elsewhere.
        expect(Number(await node.call('CLUSTER', 'COUNTKEYSINSLOT', namespaceSlot(namespace)))).toBeGreaterThan(0);
        const names = ((await node.client('LIST')) as string).split('\n').map((line) => /name=(\S*)/.exec(line)?.[1] ?? '');
        expect(names.filter((name) => name === `sluice:${namespace}:command`)).toHaveLength(2); // worker + producer
        for (const other of tiers.keys())
          if (other !== namespace) expect(names.filter((name) => name.startsWith(`sluice:${other}:`))).toEqual([]);
      } finally {
        node.disconnect();
      }
      expect((await clients.get(namespace)!.stats({ workflow: 'tier.order' })).workflows['tier.order']).toMatchObject({
        completed: 100,
        waiting: 0,
        active: 0,
      });
    }
    instance.disconnect();
  });
});
