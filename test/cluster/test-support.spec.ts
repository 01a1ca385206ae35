import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import { dropNamespace, isCluster, rawRedis, testCluster, testConnection, uniqueNamespace } from '../support/app';
import { namespaceKeys } from '../support/workflows';

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
