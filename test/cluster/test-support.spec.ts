import calculateSlot from 'cluster-key-slot';
import Redis, { Cluster } from 'ioredis';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { dropNamespace, isCluster, rawRedis, testCluster, testConnection, uniqueNamespace } from '../support/app';
import { sluiceConnectionNames } from '../support/client-list';
import { namespaceNode, serverNodes } from '../support/nodes';
import { channelSubscribers, listenToChannels, publishOn } from '../support/pubsub';
import { watchLane } from '../support/queue-state';
import { scriptsOn } from '../support/scripts';
import { monitorCommands, namespaceKeys } from '../support/workflows';

/** The e2e helpers in cluster mode (SLUICE_TEST_CLUSTER, set by cluster.global-setup.ts): they must reach every master. */
describe('test support on the shared cluster', () => {
  const redis = rawRedis();
  afterAll(() => redis.quit());

  it('connects through the seeds of SLUICE_TEST_CLUSTER', () => {
    const seeds = testCluster()!;
    expect(seeds.length).toBeGreaterThanOrEqual(3);
    expect(testConnection()).toEqual({ cluster: seeds });
    expect(isCluster(redis)).toBe(true);
  });

  it('finds and drops a namespace on whichever master serves it, and only that namespace', async () => {
    const cluster = redis as unknown as Cluster;
    const slots = await cluster.cluster('SLOTS');
    const masterOf = (namespace: string) => {
      const slot = calculateSlot(`{sluice:${namespace}}`);
      const [, , master] = slots.find(([start, end]) => start <= slot && slot <= end)!;
      return master[1];
    };
    // One namespace on each master, so a scan of one node only would fail.
    const byMaster = new Map<number, string>();
    while (byMaster.size < slots.length) {
      const namespace = uniqueNamespace('scan');
      if (!byMaster.has(masterOf(namespace))) byMaster.set(masterOf(namespace), namespace);
    }
    const namespaces = [...byMaster.values()];
    for (const namespace of namespaces) await Promise.all(Array.from({ length: 5 }, (_, i) => redis.set(`{sluice:${namespace}}:k${i}`, i)));
    for (const namespace of namespaces) expect(new Set(await namespaceKeys(redis, namespace)).size).toBe(5);

    const [dropped, ...kept] = namespaces;
    await dropNamespace(redis, dropped);
    expect(await namespaceKeys(redis, dropped)).toEqual([]);
    for (const namespace of kept) {
      expect(new Set(await namespaceKeys(redis, namespace)).size).toBe(5);
      await dropNamespace(redis, namespace);
      expect(await namespaceKeys(redis, namespace)).toEqual([]);
    }
  });
});

/**
 * The helpers that send keyless commands (CLIENT LIST, MONITOR, CONFIG, PSUBSCRIBE to keyspace
 * events, PUBSUB, SPUBLISH) pick the right node: each check runs on a namespace of every master,
 * so one that asked a random node would fail on some of them rather than pass by luck.
 */
describe('cluster-aware helpers on the shared cluster', () => {
  const redis = rawRedis();
  const namespaces: string[] = [];
  let ports: number[] = [];
  afterAll(async () => {
    for (const namespace of namespaces) await dropNamespace(redis, namespace);
    await redis.quit();
  });

  beforeAll(async () => {
    const cluster = redis as unknown as Cluster;
    const slots = await cluster.cluster('SLOTS');
    const masterOf = (namespace: string) => {
      const slot = calculateSlot(`{sluice:${namespace}}`);
      return slots.find(([start, end]) => start <= slot && slot <= end)![2][1];
    };
    const byMaster = new Map<number, string>();
    while (byMaster.size < slots.length) {
      const namespace = uniqueNamespace('helpers');
      if (!byMaster.has(masterOf(namespace))) byMaster.set(masterOf(namespace), namespace);
    }
    ports = [...byMaster.keys()];
    namespaces.push(...byMaster.values());
  });

  it('namespaceNode is the master serving the namespace; serverNodes every master', async () => {
    expect((await serverNodes(redis)).map((node) => node.options.port).sort()).toEqual([...ports].sort());
    for (const [i, namespace] of namespaces.entries()) expect((await namespaceNode(redis, namespace)).options.port).toBe(ports[i]);
  });

  it('watchLane hears a push to the lane, wherever the namespace lives', async () => {
    for (const namespace of namespaces) {
      const keys = new RedisKeys('sluice', namespace);
      const lane = await watchLane(redis, keys, 'w');
      await redis.rpush(keys.lane('w', undefined, 'queue'), 'r1');
      await redis.zadd(keys.lane('w', undefined, 'waiting'), 1, 'r2');
      expect(await lane.writes()).toEqual([`rpush ${keys.lane('w', undefined, 'queue')}`, `zadd ${keys.lane('w', undefined, 'waiting')}`]);
    }
  });

  it('sluiceConnectionNames lists the named connections of every master', async () => {
    const named = await Promise.all(
      namespaces.map(async (namespace) => {
        const node = await namespaceNode(redis, namespace);
        const connection = new Redis({
          host: node.options.host,
          port: node.options.port,
          connectionName: `sluice:${namespaces[0]}:${node.options.port}`,
        });
        await connection.ping();
        return connection;
      }),
    );
    try {
      expect(await sluiceConnectionNames(redis, namespaces[0])).toEqual(ports.map((port) => `sluice:${namespaces[0]}:${port}`).sort());
    } finally {
      named.forEach((connection) => connection.disconnect());
    }
  });

  it("publishOn, listenToChannels and channelSubscribers use sharded channels on the namespace's shard", async () => {
    for (const namespace of namespaces) {
      const channel = new RedisKeys('sluice', namespace).done('r1');
      const listener = await listenToChannels(redis, `{sluice:${namespace}}:done:*`, [channel]);
      expect(await channelSubscribers(redis, channel)).toBe(1);
      expect(await publishOn(redis, channel, 'x')).toBe(1);
      await listener.close();
      expect(listener.heard).toEqual([channel]);
      expect(await channelSubscribers(redis, channel)).toBe(0);
    }
  });

  it("scriptsOn without a namespace guards each call in its keys' namespace; monitorCommands watches that node", async () => {
    const scripts = scriptsOn(redis);
    for (const namespace of namespaces) {
      const keys = new RedisKeys('sluice', namespace);
      const monitor = await monitorCommands(namespace);
      try {
        await scripts.run('set-limits', [keys.limits, keys.seq], [keys.base, 'wf:w', 5, 'w', '']);
        expect(await redis.hget(keys.limits, 'wf:w')).toBe('5');
        const call = await monitor.next((args) => /^fcall$|^evalsha$|^eval$/.test(args[0]) && args.includes(keys.limits));
        expect(call).toEqual(expect.arrayContaining(keys.slotGuard(true)));
      } finally {
        await monitor.close();
      }
    }
  });
});
