import { Inject } from '@nestjs/common';
import Redis from 'ioredis';
import { RunContext, Workflow } from '../../lib';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { connectionNamesWhen, sluiceConnectionNames } from '../support/client-list';

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
