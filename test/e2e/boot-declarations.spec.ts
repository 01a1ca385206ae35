import 'reflect-metadata';
import type Redis from 'ioredis';
import { QueueAdmin, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, isCluster, rawRedis, uniqueNamespace, type TestApp } from '../support/app';
import { enterMonitor } from '../support/workflows';

/**
 * Pay for what you use, at boot: code that declares no cap, rate limit, schedule or retention
 * setting sends no declarations when Redis holds what they would write (lua/reserve.lua
 * alreadyDeclared, checked by the worker's first reserve). When it does not (a namespace's first
 * boot, a value an older declaration left, an operator's runtime value), the declarations follow
 * and the latest bootstrap still wins.
 */

@Workflow('bootdecl.echo')
class PlainWorkflow {
  async run(input: { n: number }) {
    return input.n;
  }
}

/** An earlier version of the same workflow, which declared a cap, a rate limit and a schedule. */
@Workflow('bootdecl.echo', {
  concurrency: 3,
  rateLimit: { max: 100, perMs: 1_000 },
  schedules: [{ id: 'bootdecl.nightly', cron: '0 3 * * *' }],
})
class DeclaringWorkflow {
  async run(input: { n: number }) {
    return input.n;
  }
}

const DECLARATIONS = /^(declare_limits|set_control|schedule_write)/;

describe('boot declarations of code that declares nothing', () => {
  let redis: Redis;
  const apps: TestApp[] = [];

  beforeAll(() => {
    redis = rawRedis();
  });

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });

  afterAll(() => redis.disconnect());

  async function boot(namespace: string, workflow: typeof PlainWorkflow, worker = true): Promise<TestApp> {
    const app = await createApp([workflow], { namespace, worker: { enabled: worker } });
    apps.push(app);
    return app;
  }

  /**
   * The script calls `action` makes on the namespace, by function name (the library's prefix cut),
   * from MONITOR; undefined on a cluster (the checks of state still run there). Ends once MONITOR
   * has shown a marker sent after the action, so every call of the action is in.
   */
  async function scriptCalls(namespace: string, action: () => Promise<void>): Promise<string[] | undefined> {
    if (isCluster(redis)) {
      await action();
      return undefined;
    }
    const monitor = await enterMonitor(redis);
    const calls: string[] = [];
    const marker = `boot-declarations-${namespace}`;
    let markerSeen!: () => void;
    const seen = new Promise<void>((resolve) => (markerSeen = resolve));
    monitor.on('monitor', (_time: string, args: string[]) => {
      const [command, name, ...rest] = args.map(String);
      if (command.toLowerCase() === 'echo' && name === marker) markerSeen();
      if (command.toLowerCase() === 'fcall' && rest.some((arg) => arg.includes(`{sluice:${namespace}}`)))
        calls.push(name.replace(/^sluice_[0-9a-f]+_/, ''));
    });
    try {
      await action();
      await redis.echo(marker);
      await seen;
    } finally {
      monitor.disconnect();
    }
    return calls;
  }

  /** Boots a worker of `workflow` for a run enqueued before it, and waits for the run: the boot's script calls and the run's attempts. */
  async function bootFor(namespace: string, producer: TestApp, workflow: typeof PlainWorkflow, n: number) {
    const handle = await producer.client.enqueue(PlainWorkflow, { n });
    const calls = await scriptCalls(namespace, async () => {
      await boot(namespace, workflow);
      expect(await handle.result({ timeoutMs: 10_000 })).toBe(n);
    });
    return { calls, run: await producer.client.get(handle.id) };
  }

  it("a namespace's first boot declares; the next boots send no declarations, and their first reserve claims the waiting run", async () => {
    const namespace = uniqueNamespace('bootdecl');
    const producer = await boot(namespace, PlainWorkflow, false);

    const first = await bootFor(namespace, producer, PlainWorkflow, 1);
    // Nothing registered yet: the first reserve's check refused, the declarations went out, and a
    // second reserve claimed the run (its only attempt).
    if (first.calls) {
      expect(first.calls.filter((name) => DECLARATIONS.test(name)).length).toBeGreaterThanOrEqual(3);
      expect(first.calls.filter((name) => name.startsWith('reserve')).length).toBeGreaterThanOrEqual(2);
    }
    expect(first.run).toMatchObject({ state: 'completed', attempts: 1 });
    await Promise.all(apps.splice(1).map((app) => app.close()));

    for (const n of [2, 3]) {
      const next = await bootFor(namespace, producer, PlainWorkflow, n);
      if (next.calls) {
        expect(next.calls.filter((name) => DECLARATIONS.test(name))).toEqual([]);
        expect(next.calls[0]).toBe('reserve_at_layout');
      }
      expect(next.run).toMatchObject({ state: 'completed', attempts: 1 });
      await Promise.all(apps.splice(1).map((app) => app.close()));
    }
  });

  it('what an older declaration left (a cap, a rate limit, a schedule) is removed by the next boot, as before; the boot after sends none', async () => {
    const namespace = uniqueNamespace('bootdecl-old');
    const keys = new RedisKeys('sluice', namespace);
    const producer = await boot(namespace, PlainWorkflow, false);
    const admin = producer.app.get(QueueAdmin);

    await bootFor(namespace, producer, DeclaringWorkflow, 1);
    await Promise.all(apps.splice(1).map((app) => app.close()));
    expect(await admin.getLimits({ workflow: 'bootdecl.echo' })).toMatchObject({ workflow: 3, rateLimit: { max: 100, perMs: 1_000 } });
    expect(await redis.zscore(keys.schedules, 'bootdecl.nightly')).not.toBeNull();

    const dropped = await bootFor(namespace, producer, PlainWorkflow, 2);
    if (dropped.calls) expect(dropped.calls.filter((name) => DECLARATIONS.test(name)).length).toBeGreaterThanOrEqual(3);
    await Promise.all(apps.splice(1).map((app) => app.close()));
    expect(await admin.getLimits({ workflow: 'bootdecl.echo' })).toMatchObject({ workflow: null, rateLimit: null });
    expect(await redis.zscore(keys.schedules, 'bootdecl.nightly')).toBeNull();

    const after = await bootFor(namespace, producer, PlainWorkflow, 3);
    if (after.calls) expect(after.calls.filter((name) => DECLARATIONS.test(name))).toEqual([]);
    expect(after.run).toMatchObject({ state: 'completed', attempts: 1 });
  });

  it('a worker of 60 workflows (over 500 fields to check, read in chunks) skips its declarations from its second boot', async () => {
    const namespace = uniqueNamespace('bootdecl-many');
    const workflows = Array.from({ length: 60 }, (_, i) => {
      class Many {
        async run(input: { n: number }) {
          return input.n;
        }
      }
      Workflow(`bootdecl.many-${i}`)(Many);
      return Many;
    });
    const bootMany = async () => {
      const app = await createApp(workflows, { namespace });
      apps.push(app);
      return app;
    };
    await bootMany();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    const calls = await scriptCalls(namespace, async () => {
      const app = await bootMany();
      expect(await app.client.run(workflows[59], { n: 59 }, { timeoutMs: 10_000 })).toBe(59);
    });
    if (calls) expect(calls.filter((name) => DECLARATIONS.test(name))).toEqual([]);
  });

  it("an operator's runtime cap on the workflow stays through every boot, which declares (the check sees the value)", async () => {
    const namespace = uniqueNamespace('bootdecl-runtime');
    const producer = await boot(namespace, PlainWorkflow, false);
    const admin = producer.app.get(QueueAdmin);
    await bootFor(namespace, producer, PlainWorkflow, 1);
    await Promise.all(apps.splice(1).map((app) => app.close()));
    await admin.setLimits({ workflow: 'bootdecl.echo', limit: 4 });

    for (const n of [2, 3]) {
      const next = await bootFor(namespace, producer, PlainWorkflow, n);
      if (next.calls) expect(next.calls.filter((name) => name.startsWith('declare_limits')).length).toBe(1);
      expect(next.run).toMatchObject({ state: 'completed', attempts: 1 });
      await Promise.all(apps.splice(1).map((app) => app.close()));
      expect(await admin.getLimits({ workflow: 'bootdecl.echo' })).toMatchObject({
        workflow: 4,
        setAtRuntime: { workflow: { declared: null } },
      });
    }
  });
});
