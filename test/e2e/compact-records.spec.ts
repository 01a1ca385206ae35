import type Redis from 'ioredis';
import { RunCancelledError, RunContext, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter } from '../support/workflows';

/**
 * `compactRunRecords`: new runs are stored without the fields that hold their default, and every
 * script and reader of this version treats a missing one as that default. Here the producer
 * writes compact records and the worker app (default options) runs them: a fleet mixing both.
 * The flow model (test/e2e/invariants.spec.ts) stores every other run compact too, through every
 * claiming and finishing script.
 */
const attempts = new Counter();

@Workflow('compact.flaky', { attempts: 3, backoff: { delayMs: 1 } })
class FlakyWorkflow {
  run(input: { failFirst: boolean }, ctx: RunContext): { attempt: number } {
    attempts.inc(ctx.runId);
    if (input.failFirst && ctx.attempt === 1) throw new Error('first attempt fails');
    return { attempt: ctx.attempt };
  }
}

const DEFAULTED = ['attempts', 'failures', 'stalls', 'priority'];

describe('compact run records', () => {
  let producer: TestApp;
  let worker: TestApp | undefined;
  let namespace: string;
  let redis: Redis;
  let keys: RedisKeys;

  beforeAll(async () => {
    namespace = uniqueNamespace('compact');
    keys = new RedisKeys('sluice', namespace);
    redis = rawRedis();
    producer = await createApp([FlakyWorkflow], { namespace, compactRunRecords: true, worker: { enabled: false } });
  });
  afterAll(async () => {
    await worker?.close();
    await producer.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('stores new runs without their default fields, from enqueue and enqueueMany; get() shows the defaults', async () => {
    const one = await producer.client.enqueue(FlakyWorkflow, { failFirst: false });
    const [many, prioritised] = await producer.client.enqueueMany(FlakyWorkflow, [
      { input: { failFirst: false } },
      { input: { failFirst: false }, opts: { priority: 4 } },
    ]);
    const given = await producer.client.enqueue(FlakyWorkflow, { failFirst: false }, { id: `given-${namespace}` });
    for (const id of [one.id, many.id, given.id]) {
      const fields = Object.keys(await redis.hgetall(keys.run(id)));
      expect(fields).toEqual(expect.arrayContaining(['workflow', 'input', 'state', 'maxAttempts', 'token', 'createdAt', 'dueAt']));
      expect(fields.filter((field) => DEFAULTED.includes(field))).toEqual([]);
      // Only a caller-given id needs the enqueue's nonce: a generated one is the call's alone.
      expect(fields.includes('nonce')).toBe(id === given.id);
    }
    expect(await redis.hget(keys.run(prioritised.id), 'priority')).toBe('4');
    expect(await producer.client.get(one.id)).toMatchObject({ state: 'waiting', priority: 0, attempts: 0, failures: 0, maxAttempts: 3 });
    expect(await producer.client.get(prioritised.id)).toMatchObject({ priority: 4, attempts: 0 });
  });

  it('a worker without the option runs them: retries count failures from nothing, a cancel finds the queued run', async () => {
    const waiting = await producer.client.enqueue(FlakyWorkflow, { failFirst: false });
    await producer.client.cancel(waiting.id);
    await expect(waiting.result({ timeoutMs: 5_000 })).rejects.toBeInstanceOf(RunCancelledError);

    const flaky = await producer.client.enqueue(FlakyWorkflow, { failFirst: true }, { priority: 2 });
    worker = await createApp([FlakyWorkflow], { namespace });
    expect(await flaky.result({ timeoutMs: 10_000 })).toEqual({ attempt: 2 });
    expect(await producer.client.get(flaky.id)).toMatchObject({ state: 'completed', attempts: 2, failures: 1, priority: 2 });
    expect(attempts.get(flaky.id)).toBe(2);
    expect(attempts.get(waiting.id)).toBe(0);
  });
});
