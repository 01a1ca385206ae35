import type Redis from 'ioredis';
import { RunContext, RunNotFoundError, RunStateError, Step, Workflow, WorkflowFailedError } from '../../lib';
import { LuaScripts } from '../../lib/redis/lua.scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter, pollUntil } from '../support/workflows';
import { SluiceServices } from '../../lib/sluice.services';

const counts = new Counter();
/** While true, step C of 'rt.steps' and every run of 'rt.flaky' throw. */
let broken = true;

@Workflow('rt.steps', { attempts: 2, backoff: { delayMs: 5 }, indexCompleted: true })
class StepsWorkflow {
  async run(input: { n: number }, ctx: RunContext): Promise<string> {
    const a = await this.stepA(ctx.runId, input.n);
    const b = await ctx.step('b', () => {
      counts.inc(`${ctx.runId}:b`);
      return a + 1;
    });
    const c = await this.stepC(ctx.runId, b);
    return `${a}/${b}/${c}@${ctx.attempt}`;
  }

  @Step() async stepA(runId: string, n: number): Promise<number> {
    counts.inc(`${runId}:a`);
    return n * 10;
  }

  @Step() async stepC(runId: string, b: number): Promise<number> {
    counts.inc(`${runId}:c`);
    if (broken) throw new Error('C is broken');
    return b + 1;
  }
}

@Workflow('rt.flaky', { attempts: 1 })
class FlakyWorkflow {
  async run(_input: unknown, ctx: RunContext): Promise<string> {
    counts.inc(`${ctx.runId}:flaky`);
    if (broken) throw new Error('still broken');
    return 'ok';
  }
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`resolved: ${JSON.stringify(value)}`);
    },
    (error: unknown) => error,
  );
}

describe('retry, retryAll and remove', () => {
  let t: TestApp;
  let namespace: string;
  let redis: Redis;
  let keys: RedisKeys;

  beforeAll(async () => {
    namespace = uniqueNamespace('rt');
    keys = new RedisKeys('sluice', namespace);
    t = await createApp([StepsWorkflow, FlakyWorkflow], { namespace, worker: { concurrency: 100 } });
    redis = rawRedis();
  });
  afterAll(async () => {
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });
  beforeEach(() => {
    broken = true;
  });

  it('resumes a failed run at the step that failed: earlier steps run once', async () => {
    const id = 'steps-1';
    const failed = await failure(t.client.run(StepsWorkflow, { n: 4 }, { id }));
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect([counts.get(`${id}:a`), counts.get(`${id}:b`), counts.get(`${id}:c`)]).toEqual([1, 1, 2]);
    const before = await t.client.get(id);
    expect(before).toMatchObject({ state: 'failed', attempts: 2, failures: 2 });
    expect(await redis.pttl(keys.run(id))).toBeGreaterThan(0);
    expect(await redis.zscore(keys.finished('rt.steps', 'failed'), id)).not.toBeNull();

    broken = false;
    expect(await t.client.retry(id)).toEqual({ id, previousState: 'failed' });
    expect(await t.client.wait(id)).toBe('40/41/42@3');
    // Steps A and B ran once in all; C failed twice, then succeeded on the retry.
    expect([counts.get(`${id}:a`), counts.get(`${id}:b`), counts.get(`${id}:c`)]).toEqual([1, 1, 3]);
    const after = await t.client.get(id);
    expect(after).toMatchObject({ state: 'completed', attempts: 3, failures: 0, result: '40/41/42@3' });
    expect(await redis.zscore(keys.finished('rt.steps', 'failed'), id)).toBeNull();
    expect(await redis.zscore(keys.finished('rt.steps', 'completed'), id)).not.toBeNull();
    expectConsistent(await auditNamespace(redis, { namespace }));
  });

  it('gives the retried run a full set of attempts, no TTL, and a place in its group lane', async () => {
    // Failed by a worker that then stops, retried from a producer: the run stays waiting, observable.
    const ns = uniqueNamespace('rt2');
    const k = new RedisKeys('sluice', ns);
    const id = 'steps-grouped';
    const worker = await createApp([StepsWorkflow], { namespace: ns });
    await failure(worker.client.run(StepsWorkflow, { n: 1 }, { id, group: 'tenant-a' }));
    await worker.close();
    const producer = await createApp([StepsWorkflow], { namespace: ns, worker: { enabled: false } });
    try {
      expect(await producer.client.retry(id)).toEqual({ id, previousState: 'failed' });
      const waiting = await producer.client.get(id);
      expect(waiting).toMatchObject({ state: 'waiting', group: 'tenant-a', failures: 0, attempts: 2 });
      expect(waiting?.finishedAt).toBeUndefined();
      expect(await redis.pttl(k.run(id))).toBe(-1); // PERSIST: no retention while not finished
      expect(await redis.lrange(k.lane('rt.steps', 'tenant-a', 'queue'), 0, -1)).toEqual([id]);
      expect(await redis.hget(k.run(id), 'step:stepA#1')).not.toBeNull(); // the memo stays
      const page = await producer.client.listRuns({ workflow: StepsWorkflow, state: 'waiting', group: 'tenant-a' });
      expect(page.runs.map((run) => run.id)).toEqual([id]);
      expectConsistent(await auditNamespace(redis, { namespace: ns }));

      // Still broken: it fails again after two more attempts (a full set), not after one.
      const c = counts.get(`${id}:c`);
      const again = await createApp([StepsWorkflow], { namespace: ns });
      try {
        expect(await failure(producer.client.wait(id))).toBeInstanceOf(WorkflowFailedError);
      } finally {
        await again.close();
      }
      expect(counts.get(`${id}:c`)).toBe(c + 2);
      expect(counts.get(`${id}:a`)).toBe(1);
      expect(await producer.client.get(id)).toMatchObject({ state: 'failed', group: 'tenant-a', failures: 2, attempts: 4 });
      expectConsistent(await auditNamespace(redis, { namespace: ns }));
    } finally {
      await producer.close();
      await dropNamespace(redis, ns);
    }
  });

  it('retries a cancelled run', async () => {
    broken = false;
    const { id } = await t.client.enqueue(FlakyWorkflow, {}, { id: 'cancelled-1', delayMs: 3_600_000 });
    await t.client.cancel(id);
    expect(await t.client.get(id)).toMatchObject({ state: 'cancelled' });
    expect(await redis.zscore(keys.finished('rt.flaky', 'cancelled'), id)).not.toBeNull();
    expect(await t.client.retry(id)).toEqual({ id, previousState: 'cancelled' });
    expect(await t.client.wait(id)).toBe('ok');
    expect(await redis.zscore(keys.finished('rt.flaky', 'cancelled'), id)).toBeNull();
    expect(await redis.hget(keys.run(id), 'reason')).toBeNull();
  });

  it('refuses runs in other states and unknown runs, writing nothing', async () => {
    broken = false;
    await t.client.run(FlakyWorkflow, {}, { id: 'done-1' });
    const before = await redis.hgetall(keys.run('done-1'));
    const error = await failure(t.client.retry('done-1'));
    expect(error).toBeInstanceOf(RunStateError);
    expect(error).toMatchObject({ runId: 'done-1', state: 'completed', expected: ['failed', 'cancelled'] });
    expect(await redis.hgetall(keys.run('done-1'))).toEqual(before);
    const missing = await failure(t.client.retry('no-such-run'));
    expect(missing).toBeInstanceOf(RunNotFoundError);
    expect(await redis.exists(keys.run('no-such-run'))).toBe(0);
    const delayed = await t.client.enqueue(FlakyWorkflow, {}, { id: 'later-1', delayMs: 3_600_000 });
    expect(await failure(t.client.retry(delayed.id))).toMatchObject({ state: 'delayed' });
    expect(await failure(t.client.remove(delayed.id))).toBeInstanceOf(RunStateError);
    expect(await t.client.get(delayed.id)).toMatchObject({ state: 'delayed' });
  });

  it('retryAll: oldest first, in batches of at most 500 per call, each run once', async () => {
    const ids = Array.from({ length: 1_200 }, (_, i) => `bulk-${String(i).padStart(4, '0')}`);
    for (let i = 0; i < ids.length; i += 400)
      await t.client.enqueueMany(
        FlakyWorkflow,
        ids.slice(i, i + 400).map((id) => ({ input: {}, opts: { id } })),
      );
    const index = keys.finished('rt.flaky', 'failed');
    await pollUntil(
      () => redis.zcard(index),
      (n) => n === ids.length,
      '1,200 failed runs',
    );
    const order = await redis.zrange(index, 0, -1);

    const scripts: LuaScripts = t.app.get(SluiceServices).scripts.get();
    const run = jest.spyOn(scripts, 'run');
    try {
      // The oldest 150 only.
      expect(await t.client.retryAll({ workflow: 'rt.flaky', state: 'failed', limit: 150 })).toBe(150);
      await pollUntil(
        () => redis.zcard(index),
        (n) => n === ids.length,
        'the 150 failing again',
      );
      const again = await redis.zrange(index, 0, -1);
      expect(again.slice(0, ids.length - 150)).toEqual(order.slice(150));
      expect(new Set(again.slice(ids.length - 150))).toEqual(new Set(order.slice(0, 150)));

      // All of them, while every retried run fails again at once: each is retried once.
      run.mockClear();
      expect(await t.client.retryAll({ workflow: FlakyWorkflow, state: 'failed' })).toBe(ids.length);
      const batches = run.mock.calls.filter(([name]) => name === 'retry').map(([, , args]) => (args as unknown[])[4] as number);
      // 500 + 500 + 200: the runs failing again meanwhile score past the bound, so are not taken.
      expect(batches).toEqual([500, 500, 500]);
      await pollUntil(
        () => redis.zcard(index),
        (n) => n === ids.length,
        'all failing again',
      );
      const first = new Set(order.slice(0, 150));
      for (const id of ids) expect(counts.get(`${id}:flaky`)).toBe(first.has(id) ? 3 : 2);
    } finally {
      run.mockRestore();
    }

    broken = false;
    expect(await t.client.retryAll({ workflow: 'rt.flaky', state: 'failed' })).toBe(ids.length);
    await pollUntil(
      () => redis.zcard(index),
      (n) => n === 0,
      'the failed index emptied',
    );
    await Promise.all(ids.map((id) => t.client.wait(id)));
    expect(await t.client.retryAll({ workflow: 'rt.flaky', state: 'failed' })).toBe(0);
    expectConsistent(await auditNamespace(redis, { namespace }));
  }, 60_000);

  it('remove deletes a finished run and its index entry; the id can be used again', async () => {
    broken = false;
    await t.client.run(FlakyWorkflow, {}, { id: 'rm-1' });
    expect(await t.client.remove('rm-1')).toBe(true);
    expect(await redis.exists(keys.run('rm-1'))).toBe(0);
    expect(await redis.zscore(keys.finished('rt.flaky', 'completed'), 'rm-1')).toBeNull();
    expect(await t.client.remove('rm-1')).toBe(false);
    const again = await t.client.enqueue(FlakyWorkflow, {}, { id: 'rm-1' });
    expect(again.created).toBe(true);
    expect(await again.result()).toBe('ok');

    broken = true;
    await failure(t.client.run(FlakyWorkflow, {}, { id: 'rm-2' }));
    expect(await t.client.remove('rm-2')).toBe(true);
    expect(await redis.zscore(keys.finished('rt.flaky', 'failed'), 'rm-2')).toBeNull();
    expectConsistent(await auditNamespace(redis, { namespace }));
  });
});
