import 'reflect-metadata';
import type Redis from 'ioredis';
import { loadScript, scriptNames, SLOT_GUARD_KEYS, type ScriptName } from '../../lib/redis/lua.scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { keySlot } from '../../lib/redis/cluster/key-slot';
import { QueueClient, Workflow } from '../../lib';
import { createApp, type TestApp } from '../support/app';
import { LocalCluster, namespaceOnShard, namespaceSlot, startRedisCluster } from '../support/redis-cluster';
import { scriptsOn } from '../support/scripts';

@Workflow('guard.w')
class GuardWorkflow {
  async run(input: { n: number }): Promise<number> {
    return input.n * 2;
  }
}

/** Every key of the slot on a node, with its serialized value: what must not change. ASKING: the importing node serves the slot's keys only then. */
async function snapshot(node: Redis, slot: number): Promise<Map<string, string>> {
  const keys = (await node.call('CLUSTER', 'GETKEYSINSLOT', slot, 100_000)) as string[];
  const pipeline = node.pipeline();
  keys.forEach((key) => pipeline.call('ASKING').dumpBuffer(key));
  const replies = (await pipeline.exec()) ?? [];
  return new Map(keys.map((key, i) => [key, String((replies[2 * i + 1][1] as Buffer | null)?.toString('hex'))]));
}

/**
 * The slot guard (lib/redis/lua.scripts.ts): while the namespace's slot is half-moved between two
 * masters, Redis refuses every one of Sluice's scripts before it runs — on the source and, asked
 * with ASKING, on the target — so none can stop halfway; once the slot has moved, the same app
 * follows it (MOVED) and its queued runs complete on the new owner.
 */
describe('Redis Cluster: no script runs while the namespace slot migrates', () => {
  let cluster: LocalCluster;
  let producer: TestApp | undefined;
  let worker: TestApp | undefined;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 2 });
  });
  afterAll(async () => {
    await Promise.all([producer?.close(), worker?.close()]);
    await cluster?.stop();
  });

  it('refuses every script on both nodes mid-migration, writes nothing, then the runs complete on the new owner', async () => {
    const [source, target] = cluster.nodes.filter((node) => node.role === 'master').map((node) => node.port);
    const namespace = await namespaceOnShard(cluster, source);
    const keys = new RedisKeys('sluice', namespace);
    const slot = namespaceSlot(namespace);
    expect(keySlot(keys.base)).toBe(slot);
    const connection = { cluster: cluster.seeds() };
    producer = await createApp([GuardWorkflow], { namespace, connection, worker: { enabled: false } });
    const handles = await Promise.all(Array.from({ length: 40 }, (_, n) => producer!.app.get(QueueClient).enqueue(GuardWorkflow, { n })));
    await producer.app.get(QueueClient).enqueue(GuardWorkflow, { n: 100 }, { delayMs: 60_000 });

    const sourceNode = cluster.connect(source);
    const targetNode = cluster.connect(target);
    let checked = 0;
    await cluster.migrateSlot(slot, target, {
      batch: 10,
      onBatch: async ({ batch }) => {
        if (batch !== 1) return;
        const before = [await snapshot(sourceNode, slot), await snapshot(targetNode, slot)];
        expect(before[0].size).toBeGreaterThan(0);
        expect(before[1].size).toBeGreaterThan(0);
        const onSource = scriptsOn(sourceNode, namespace, true); // a node of the cluster: the calls carry the guard
        for (const name of scriptNames() as ScriptName[]) {
          const own = loadScript(name).numberOfKeys - SLOT_GUARD_KEYS;
          // Declared keys still on the source, so Redis would run the script there but for the
          // guard (and it would reach keys already moved); the values do not matter: nothing runs.
          const scriptKeys = [...before[0].keys()].slice(0, own);
          await expect(onSource.run(name, scriptKeys, [keys.base, 0, 0, 0, 0, 0])).rejects.toThrow(/TRYAGAIN Multiple keys|ASK \d+/);
          const source = loadScript(name).source;
          const asked =
            (await targetNode
              .pipeline()
              .call('ASKING')
              .eval(source, own + SLOT_GUARD_KEYS, ...scriptKeys, ...keys.slotGuard(true), keys.base, 0)
              .exec()) ?? [];
          expect(String(asked[1]?.[0])).toMatch(/TRYAGAIN Multiple keys/);
          checked += 1;
        }
        expect([await snapshot(sourceNode, slot), await snapshot(targetNode, slot)]).toEqual(before);
      },
    });
    expect(checked).toBe(scriptNames().length);
    expect(await cluster.masterOf(slot)).toBe(target);

    // The producer's connection still points at the source: its next call follows MOVED.
    expect(await producer.app.get(QueueClient).get(handles[0].id)).toMatchObject({ state: 'waiting' });
    worker = await createApp([GuardWorkflow], { namespace, connection });
    const results = await Promise.all(handles.map((handle) => handle.result({ timeoutMs: 20_000 })));
    expect(results).toEqual(handles.map((_, n) => n * 2));
    sourceNode.disconnect();
    targetNode.disconnect();
  });
});
