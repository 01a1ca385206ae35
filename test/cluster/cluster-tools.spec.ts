import calculateSlot from 'cluster-key-slot';
import Redis, { Cluster } from 'ioredis';
import { LocalCluster, MigrateProgress, namespaceOnShard, namespaceSlot, SLOTS, startRedisCluster } from '../support/redis-cluster';

/** The cluster tools themselves (test/support/redis-cluster.ts): formation, key placement, live resharding, failover. */
jest.setTimeout(30_000);

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
/** Closed after the test: QUIT while it answers; one already ended (its node killed) is left alone — ioredis' disconnect would arm a 2 s timer. */
const closing = <T extends Redis | Cluster>(client: T): T => {
  cleanups.push(() => (client.status === 'end' ? undefined : client.quit().catch(() => client.disconnect())));
  return client;
};

describe('a 3-master cluster', () => {
  let cluster: LocalCluster;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
  });
  afterAll(() => cluster?.stop());

  it('forms with the slots split evenly, the same map on every node', async () => {
    const masters = cluster.nodes.map((n) => n.port);
    expect(cluster.nodes.map((n) => n.role)).toEqual(['master', 'master', 'master']);
    expect(cluster.seeds()).toEqual(masters.map((port) => ({ host: '127.0.0.1', port })));
    const maps = await Promise.all(masters.map((port) => cluster.slotMap(port)));
    for (const map of maps) expect(map).toEqual(maps[0]);
    expect(maps[0].map((r) => r.master)).toEqual(masters);
    expect(maps[0][0].start).toBe(0);
    expect(maps[0][2].end).toBe(SLOTS - 1);
    for (const r of maps[0]) expect(r.end - r.start + 1).toBeGreaterThanOrEqual(Math.floor(SLOTS / 3));
  });

  it('puts each key on the master of its slot, and namespaceOnShard picks a namespace on the master asked for', async () => {
    const client = closing(cluster.client());
    const keys = Array.from({ length: 30 }, (_, i) => `key:${i}`);
    for (const key of keys) await client.set(key, key);
    for (const key of keys) {
      const owner = await cluster.ownerOfKey(key);
      for (const node of cluster.nodes) {
        const direct = closing(cluster.connect(node.port));
        if (node.port === owner) expect(await direct.get(key)).toBe(key);
        else await expect(direct.get(key)).rejects.toThrow(`MOVED ${calculateSlot(key)} 127.0.0.1:${owner}`);
      }
    }
    for (const { port } of cluster.nodes) {
      const namespace = await namespaceOnShard(cluster, port);
      expect(await cluster.ownerOfKey(`{sluice:${namespace}}:runs`)).toBe(port);
      expect(await cluster.masterOf(namespaceSlot(namespace))).toBe(port);
    }
  });

  it('migrateSlot moves every key of a slot in batches while clients keep reading and writing, then every node sees the new owner', async () => {
    const [source, target] = cluster.nodes.map((n) => n.port);
    const namespace = await namespaceOnShard(cluster, source);
    const slot = namespaceSlot(namespace);
    const key = (i: number) => `{sluice:${namespace}}:k${i}`;
    const client = closing(cluster.client());
    await Promise.all(Array.from({ length: 250 }, (_, i) => client.set(key(i), `v${i}`)));

    const progress: MigrateProgress[] = [];
    const result = await cluster.migrateSlot(slot, target, {
      batch: 100,
      onBatch: async (p) => {
        progress.push(p);
        // Half-moved: a key already moved, one not yet moved and a new one (ASK to the target) all work.
        expect(await client.get(p.keys[0])).toBe(`v${p.keys[0].slice(p.keys[0].lastIndexOf(':k') + 2)}`);
        expect(await client.get(key(249))).toBe('v249');
        await client.set(`{sluice:${namespace}}:new${p.batch}`, 'x');
        // The slot map does not change until the end: the source still owns the slot.
        expect(await cluster.masterOf(slot)).toBe(source);
      },
    });

    expect(result).toEqual({ slot, from: source, to: target, moved: 250, batches: 3 });
    expect(progress.map((p) => [p.batch, p.keys.length, p.moved])).toEqual([
      [1, 100, 100],
      [2, 100, 200],
      [3, 50, 250],
    ]);
    for (const { port } of cluster.nodes) expect(await cluster.masterOf(slot, port)).toBe(target);
    const sourceConn = closing(cluster.connect(source));
    const targetConn = closing(cluster.connect(target));
    expect(await sourceConn.cluster('COUNTKEYSINSLOT', slot)).toBe(0);
    expect(await targetConn.cluster('COUNTKEYSINSLOT', slot)).toBe(253); // 250 moved + 3 written mid-move
    expect(await client.mget(...Array.from({ length: 250 }, (_, i) => key(i)))).toEqual(Array.from({ length: 250 }, (_, i) => `v${i}`));
    await expect(cluster.migrateSlot(slot, target)).rejects.toThrow(/already on/);
  });
});

describe('a 3-master, 3-replica cluster', () => {
  let cluster: LocalCluster;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
  });
  afterAll(() => cluster?.stop());

  it('fails a killed master over to its replica, which then serves its slots and data; restarted, the old master rejoins as a replica', async () => {
    const [master, ...others] = cluster.nodes.slice(0, 3);
    const replica = cluster.nodes.find((n) => n.masterId === master.id)!;
    expect(replica.role).toBe('replica');
    const namespace = await namespaceOnShard(cluster, master.port);
    const key = `{sluice:${namespace}}:run`;
    const direct = closing(cluster.connect(master.port, { retryStrategy: () => null }));
    direct.on('error', () => undefined);
    await direct.set(key, 'kept');
    expect(await direct.call('WAIT', 1, 2_000)).toBe(1); // on the replica before the kill

    await cluster.kill(master.port);
    const started = Date.now();
    const promoted = await cluster.waitForFailover(master.port);
    const failoverMs = Date.now() - started;

    expect(promoted).toBe(replica.port);
    expect(replica.role).toBe('master');
    for (const node of cluster.nodes.filter((n) => n.alive))
      expect(await cluster.masterOf(namespaceSlot(namespace), node.port)).toBe(promoted);
    expect(await closing(cluster.connect(promoted)).get(key)).toBe('kept');
    // Seeds still list the dead node; a client skips it.
    expect(await closing(cluster.client()).get(key)).toBe('kept');
    expect(failoverMs).toBeLessThan(15_000);

    await cluster.restart(master.port);
    expect(master.role).toBe('replica');
    expect(master.masterId).toBe(replica.id);
    expect((await cluster.slotMap(others[0].port)).find((r) => r.master === promoted)!.replicas).toEqual([master.port]);
    const back = closing(cluster.connect(master.port));
    await back.call('READONLY');
    expect(await back.get(key)).toBe('kept'); // its data was lost with the kill, resynced from the new master
  });
});
