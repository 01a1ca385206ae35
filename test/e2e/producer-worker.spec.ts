import { Inject } from '@nestjs/common';
import Redis from 'ioredis';
import { RunCancelledError, RunContext, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { connectionNamesWhen, sluiceConnectionNames } from '../support/client-list';
import { RedisAdmin, sluiceConnectionName } from '../support/redis-process';
import { serverNodes } from '../support/nodes';
import { channelSubscribers } from '../support/pubsub';
import { pollUntil } from '../support/workflows';

const TRACKER = 'TRACKER';

/** Which app executed what: each app gets its own tracker instance as a provider. */
interface Tracker {
  executed: string[];
}

@Workflow('pw.double')
class DoubleWorkflow {
  constructor(@Inject(TRACKER) private readonly tracker: Tracker) {}

  async run(input: { n: number }, ctx: RunContext): Promise<number> {
    this.tracker.executed.push(ctx.runId);
    return input.n * 2;
  }
}

function makeWorkflow(name: string): new () => { run(input: { x: number }): Promise<number> } {
  @Workflow(name)
  class Numbered {
    async run(input: { x: number }): Promise<number> {
      return input.x + 1;
    }
  }
  return Numbered;
}
const NUMBERED = ['one', 'two', 'three', 'four', 'five', 'six'].map((n) => makeWorkflow(`pw.${n}`));

const role = (name: string) => name.split(':').pop();
const hasAllRoles = (names: string[]) => ['blocking', 'command', 'subscriber'].every((r) => names.some((n) => role(n) === r));

describe('producer-only app and worker app', () => {
  let redis: Redis;
  const apps: TestApp[] = [];
  const namespaces: string[] = [];
  const open = async (...args: Parameters<typeof createApp>) => {
    namespaces.push(args[1].namespace);
    const app = await createApp(...args);
    apps.push(app);
    return app;
  };

  beforeAll(() => {
    redis = rawRedis();
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    for (const ns of new Set(namespaces)) await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('the producer enqueues and awaits, only the worker executes, and the producer never blocks on Redis', async () => {
    const ns = uniqueNamespace('pw');
    const producerTracker: Tracker = { executed: [] };
    const workerTracker: Tracker = { executed: [] };

    await open([DoubleWorkflow, { provide: TRACKER, useValue: workerTracker }], { namespace: ns });
    // The idle worker blocks on its wake list: exactly one blocking connection exists, the worker's.
    const idle = await connectionNamesWhen(redis, ns, (names) => names.some((n) => role(n) === 'blocking'));
    expect(idle.filter((n) => role(n) === 'blocking')).toEqual([`sluice:${ns}:blocking`]);

    const producer = await open([DoubleWorkflow, { provide: TRACKER, useValue: producerTracker }], {
      namespace: ns,
      worker: { enabled: false },
    });
    const handles = await producer.client.enqueueMany(
      DoubleWorkflow,
      Array.from({ length: 10 }, (_, n) => ({ input: { n } })),
    );
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })));
    expect(results).toEqual(Array.from({ length: 10 }, (_, n) => n * 2));
    expect(await producer.client.run(DoubleWorkflow, { n: 21 }, { timeoutMs: 10_000 })).toBe(42);

    expect(producerTracker.executed).toEqual([]);
    expect(workerTracker.executed).toHaveLength(11);
    expect(workerTracker.executed.slice(0, 10).sort()).toEqual(handles.map((h) => h.id).sort());

    // Producer: command + subscriber (it waited); worker: command + blocking + subscriber (the
    // cancel channel). Still one blocking connection, so the producer opened none.
    expect(await sluiceConnectionNames(redis, ns)).toEqual([
      `sluice:${ns}:blocking`,
      `sluice:${ns}:command`,
      `sluice:${ns}:command`,
      `sluice:${ns}:subscriber`,
      `sluice:${ns}:subscriber`,
    ]);
  });

  it('after their subscriber connections are killed, each app has one subscriber again, named, each channel subscribed once', async () => {
    const ns = uniqueNamespace('pw-resub');
    const keys = new RedisKeys('sluice', ns);
    // The worker subscribes to the cancel channel at boot (it claims nothing, so at once: BootQuiet); the
    // producer waits on a run delayed past the test, so its subscriber holds the run's done channel.
    await open([DoubleWorkflow, { provide: TRACKER, useValue: { executed: [] } }], { namespace: ns });
    const producer = await open([], { namespace: ns, worker: { enabled: false } });
    const handle = await producer.client.enqueue(DoubleWorkflow, { n: 1 }, { runAt: new Date(Date.now() + 3_600_000) });
    const waited = producer.client.wait(handle.id, { timeoutMs: 20_000 });
    waited.catch(() => undefined);
    const numsub = async () => [await channelSubscribers(redis, keys.cancel), await channelSubscribers(redis, keys.done(handle.id))];
    await pollUntil(numsub, ([cancel, done]) => cancel === 1 && done === 1, 'both channels subscribed');

    // Every server of the test's Redis (each master of a cluster holds some of the connections).
    const admins = (await serverNodes(redis)).map((node) => new RedisAdmin(node));
    const subscribers = { namePrefix: sluiceConnectionName(ns, 'subscriber') };
    const killed = (await Promise.all(admins.map((admin) => admin.killClients(subscribers)))).flat();
    expect(killed).toHaveLength(2);
    // Each app reconnects on its own, and the link names the new connection (CLIENT SETNAME in the
    // write that follows its connect): the two named subscribers and both subscriptions are back.
    await pollUntil(
      async () => [(await Promise.all(admins.map((admin) => admin.clients(subscribers)))).flat().length, ...(await numsub())],
      ([named, cancel, done]) => named === 2 && cancel === 1 && done === 1,
      'two named subscribers, each channel subscribed again',
    );
    // No other connection of either app: a leaked or duplicated subscriber would be a third name,
    // or a second subscription of a channel.
    expect(await sluiceConnectionNames(redis, ns)).toEqual([
      `sluice:${ns}:blocking`,
      `sluice:${ns}:command`,
      `sluice:${ns}:command`,
      `sluice:${ns}:subscriber`,
      `sluice:${ns}:subscriber`,
    ]);
    expect(await numsub()).toEqual([1, 1]);
    // The producer's new subscription delivers: the cancel's done message settles the wait.
    await producer.client.cancel(handle.id);
    await expect(waited).rejects.toBeInstanceOf(RunCancelledError);
  });

  it('opens exactly three connections per app, whether it has 1 or 6 workflows', async () => {
    const nsOne = uniqueNamespace('conn1');
    const nsSix = uniqueNamespace('conn6');
    const one = await open([NUMBERED[0]], { namespace: nsOne });
    const six = await open(NUMBERED, { namespace: nsSix });

    expect(await one.client.run(NUMBERED[0], { x: 1 }, { timeoutMs: 10_000 })).toBe(2);
    const outs = await Promise.all(NUMBERED.map((wf, x) => six.client.run(wf, { x }, { timeoutMs: 10_000 })));
    expect(outs).toEqual([1, 2, 3, 4, 5, 6]);

    for (const ns of [nsOne, nsSix]) {
      const names = await connectionNamesWhen(redis, ns, hasAllRoles);
      expect(names).toEqual([`sluice:${ns}:blocking`, `sluice:${ns}:command`, `sluice:${ns}:subscriber`]);
    }

    // More runs do not open more connections.
    await Promise.all(NUMBERED.map((wf, x) => six.client.run(wf, { x }, { timeoutMs: 10_000 })));
    expect(await sluiceConnectionNames(redis, nsSix)).toEqual([
      `sluice:${nsSix}:blocking`,
      `sluice:${nsSix}:command`,
      `sluice:${nsSix}:subscriber`,
    ]);
  });
});
