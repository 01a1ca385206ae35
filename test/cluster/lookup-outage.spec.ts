import 'reflect-metadata';
import { Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, type TestApp } from '../support/app';
import { LogCapture } from '../support/log-capture';
import { LocalCluster, namespaceOnShard, startRedisCluster } from '../support/redis-cluster';
import { until } from './paced-producer';

@Workflow('lookup.w')
class LookupWorkflow {
  async run(input: { n: number }): Promise<number> {
    return input.n * 3;
  }
}

/**
 * Every node of the cluster down at once, so that looking the slot's master up fails: the
 * connections must keep trying and come back by themselves when the nodes do — in particular a
 * worker's subscriber (its cancel channel), over which the worker makes no call that would
 * reopen it. (ioredis ends a connection for good when its connector fails; Sluice's connector
 * never fails a lookup to ioredis, it tries the last owner known instead.) The nodes keep no
 * data, so the test asserts the connections, then a new run.
 */
describe('Redis Cluster: every node down, then back', () => {
  let cluster: LocalCluster;
  let worker: TestApp | undefined;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 2 });
  });
  afterAll(async () => {
    await worker?.close();
    await cluster?.stop();
  });

  it("a worker's cancel subscription comes back by itself, and the worker runs again", async () => {
    const [a, b] = cluster.nodes.map((node) => node.port);
    const namespace = await namespaceOnShard(cluster, b, 'sluice', 'lookup');
    const logs = new LogCapture();
    worker = await createApp([LookupWorkflow], { namespace, connection: { cluster: cluster.seeds() } });
    worker.app.useLogger(logs);
    const channel = new RedisKeys('sluice', namespace).cancel;
    const subscribers = async () => {
      const node = cluster.connect(b);
      try {
        return Number(((await node.call('PUBSUB', 'SHARDNUMSUB', channel)) as unknown[])[1]);
      } finally {
        node.disconnect();
      }
    };
    await until('the cancel channel subscribed on its master', 10_000, async () => (await subscribers()) === 1);

    const mark = logs.mark();
    // One after the other: kill() reads the slot map through a node still alive.
    await cluster.kill(a);
    await cluster.kill(b);
    // The first reconnect attempt has looked the owner up, with every node down.
    await until('the subscriber noticed', 10_000, async () => logs.find('warn', 'Redis subscriber connection down', mark).length > 0);
    await Promise.all([cluster.restart(a), cluster.restart(b)]);

    await until('the cancel channel subscribed again', 15_000, async () => (await subscribers()) === 1);
    await expect(worker.client.run(LookupWorkflow, { n: 14 }, { timeoutMs: 15_000 })).resolves.toBe(42);
  });
});
