import type Redis from 'ioredis';
import { RunContext, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';

/** When each run's code started, by Node's clock (same host as the Redis clock). */
const startedAt = new Map<string, number>();
/** Execution order per namespace, for the priority test. */
const order = new Map<string, string[]>();

@Workflow('sched.timed')
class TimedWorkflow {
  async run(_input: Record<string, never>, ctx: RunContext): Promise<string> {
    startedAt.set(ctx.runId, Date.now());
    return ctx.runId;
  }
}

@Workflow('sched.ordered')
class OrderedWorkflow {
  async run(input: { ns: string; label: string }): Promise<void> {
    const list = order.get(input.ns) ?? [];
    list.push(input.label);
    order.set(input.ns, list);
  }
}

describe('scheduling: delay and runAt', () => {
  let t: TestApp;
  let namespace: string;
  let redis: Redis;

  beforeAll(async () => {
    namespace = uniqueNamespace('sched');
    t = await createApp([TimedWorkflow], { namespace });
    redis = rawRedis();
  });
  afterAll(async () => {
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it.each([
    ['300 (ms)', 300],
    ["'300ms'", '300ms'],
  ])('a run delayed by %s starts no earlier than its delayMs', async (_label, delayMs) => {
    const enqueuedAt = Date.now();
    const handle = await t.client.enqueue(TimedWorkflow, {}, { delayMs });
    const parked = await t.client.get(handle.id);
    // Due by the Redis clock at the enqueue, 300 ms on; created by the producer's clock when it
    // generated the id (the id carries it), which on this machine is not after Redis's.
    const dueInMs = parked!.dueAt.getTime() - parked!.createdAt.getTime();
    expect(dueInMs).toBeGreaterThanOrEqual(300);
    expect(dueInMs).toBeLessThanOrEqual(300 + (Date.now() - enqueuedAt));
    expect(await redis.zscore(new RedisKeys('sluice', namespace).workflow('sched.timed', 'delayed'), handle.id)).toBe(
      String(parked!.dueAt.getTime()),
    );

    await expect(handle.result({ timeoutMs: 10_000 })).resolves.toBe(handle.id);
    const info = (await t.client.get(handle.id))!;
    expect(info.state).toBe('completed');
    expect(info.startedAt!.getTime()).toBeGreaterThanOrEqual(info.dueAt.getTime());
    expect(info.startedAt!.getTime() - info.createdAt.getTime()).toBeGreaterThanOrEqual(300);
    expect(startedAt.get(handle.id)! - enqueuedAt).toBeGreaterThanOrEqual(300);
  });

  it('a delayed run is in state "delayed" until it is due', async () => {
    const handle = await t.client.enqueue(TimedWorkflow, {}, { delayMs: '1h' });
    expect((await t.client.get(handle.id))?.state).toBe('delayed');
    expect(startedAt.has(handle.id)).toBe(false);
    expect(await redis.zrem(new RedisKeys('sluice', namespace).workflow('sched.timed', 'delayed'), handle.id)).toBe(1); // never run it
  });

  it('a run with runAt starts no earlier than runAt, and runAt wins over delay', async () => {
    const runAt = new Date(Date.now() + 300);
    const handle = await t.client.enqueue(TimedWorkflow, {}, { runAt, delayMs: '1h' });
    const parked = (await t.client.get(handle.id))!;
    expect(parked.state).toBe('delayed');
    expect(parked.dueAt.getTime()).toBe(runAt.getTime());

    await expect(handle.result({ timeoutMs: 10_000 })).resolves.toBe(handle.id);
    const info = (await t.client.get(handle.id))!;
    expect(info.startedAt!.getTime()).toBeGreaterThanOrEqual(runAt.getTime());
    expect(startedAt.get(handle.id)!).toBeGreaterThanOrEqual(runAt.getTime());
  });

  it('a runAt in the past runs at once', async () => {
    const runAt = new Date(Date.now() - 60_000);
    const handle = await t.client.enqueue(TimedWorkflow, {}, { runAt });
    await expect(handle.result({ timeoutMs: 10_000 })).resolves.toBe(handle.id);
    expect((await t.client.get(handle.id))?.dueAt.getTime()).toBe(runAt.getTime());
  });
});

describe('scheduling: priority', () => {
  const namespace = uniqueNamespace('prio');
  let producer: TestApp;
  let worker: TestApp | undefined;
  let redis: Redis;

  beforeAll(async () => {
    producer = await createApp([OrderedWorkflow], { namespace, worker: { enabled: false } });
    redis = rawRedis();
  });
  afterAll(async () => {
    await worker?.close();
    await producer.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('due runs start highest priority first, FIFO within a priority', async () => {
    const runs: Array<[string, number]> = [
      ['p1', 1],
      ['p5-first', 5],
      ['p3', 3],
      ['p0', 0],
      ['p5-second', 5],
      ['p3-second', 3],
    ];
    const handles = [];
    for (const [label, priority] of runs)
      handles.push(await producer.client.enqueue(OrderedWorkflow, { ns: namespace, label }, { priority }));
    for (const handle of handles) expect((await producer.client.get(handle.id))?.state).toBe('waiting');
    expect(order.get(namespace)).toBeUndefined(); // the producer runs nothing

    worker = await createApp([OrderedWorkflow], { namespace, worker: { concurrency: 1 } });
    await Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })));
    expect(order.get(namespace)).toEqual(['p5-first', 'p5-second', 'p3', 'p3-second', 'p1', 'p0']);
  });
});
