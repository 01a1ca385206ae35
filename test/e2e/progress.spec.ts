import type Redis from 'ioredis';
import { InvalidOptionError, MAX_PROGRESS_BYTES, PayloadNotSerializableError, PayloadTooLargeError, RunContext, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { SluiceTesting } from '../../lib/testing';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { channelSubscribers } from '../support/pubsub';
import { scriptsOn } from '../support/scripts';
import { deferred, Gates, pollUntil } from '../support/workflows';

const gates = new Gates();

/** Reports step i of count, tells the test (`<key>:reached:<i>`), then waits for `<key>:go:<i>`. */
@Workflow('pg.stepper')
class StepperWorkflow {
  async run(input: { key: string; count: number }, ctx: RunContext): Promise<{ done: number }> {
    for (let i = 1; i <= input.count; i++) {
      await ctx.progress({ i, of: input.count });
      gates.open(`${input.key}:reached:${i}`);
      await gates.get(`${input.key}:go:${i}`).promise;
    }
    return { done: input.count };
  }
}

/** How long each burst run took to make its calls, by key. */
const burstSpans = new Map<string, number>();

/** `calls` progress calls, one per event-loop turn, awaiting only the last. */
@Workflow('pg.burst')
class BurstWorkflow {
  async run(input: { key: string; calls: number }, ctx: RunContext): Promise<string> {
    const started = Date.now();
    let last: Promise<void> = Promise.resolve();
    for (let i = 1; i <= input.calls; i++) {
      last = ctx.progress(i);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await last;
    burstSpans.set(input.key, Date.now() - started);
    return 'ok';
  }
}

const circular: Record<string, unknown> = {};
circular.self = circular;
const BAD_VALUES: unknown[] = [undefined, () => 1, Symbol('s'), circular, new WeakMap(), 'x'.repeat(MAX_PROGRESS_BYTES)];
/** What each bad value's ctx.progress rejected with, by run id. */
const badOutcomes = new Map<string, unknown[]>();

@Workflow('pg.bad', { attempts: 1 })
class BadValuesWorkflow {
  async run(_input: null, ctx: RunContext): Promise<string> {
    const outcomes: unknown[] = [];
    for (const value of BAD_VALUES)
      outcomes.push(
        await ctx.progress(value).then(
          () => 'resolved',
          (error: unknown) => error,
        ),
      );
    badOutcomes.set(ctx.runId, outcomes);
    return 'ok';
  }
}

/** Awaits some values, then returns right after reporting one more without awaiting it. */
@Workflow('pg.last')
class LastValueWorkflow {
  async run(input: { n: number }, ctx: RunContext): Promise<string> {
    for (let i = 1; i <= input.n; i++) await ctx.progress({ pct: i * 10, at: new Date(i * 1000) });
    void ctx.progress({ pct: 'last' });
    return 'ok';
  }
}

/** Never reports progress. */
@Workflow('pg.silent')
class SilentWorkflow {
  async run(input: { key: string }): Promise<string> {
    await gates.get(`${input.key}:go`).promise;
    return 'quiet';
  }
}

const WORKFLOWS = [StepperWorkflow, BurstWorkflow, BadValuesWorkflow, LastValueWorkflow, SilentWorkflow];
const unique = (label: string) => `${label}-${Math.random().toString(36).slice(2)}`;

describe('ctx.progress', () => {
  let t: TestApp;
  let redis: Redis;
  let namespace: string;
  let keys: RedisKeys;

  beforeAll(async () => {
    namespace = uniqueNamespace('progress');
    keys = new RedisKeys('sluice', namespace);
    t = await createApp(WORKFLOWS, { namespace, worker: { concurrency: 8 } });
    redis = rawRedis();
  });
  afterAll(async () => {
    gates.openAll();
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  const numsub = (channel: string) => channelSubscribers(redis, channel);

  it('stores each value on the run, readable with get() during the run and after it', async () => {
    const key = unique('get');
    const handle = await t.client.enqueue(StepperWorkflow, { key, count: 2 });
    await gates.get(`${key}:reached:1`).promise;
    expect(await t.client.get(handle.id)).toMatchObject({ state: 'active', progress: { i: 1, of: 2 } });
    gates.open(`${key}:go:1`);
    await gates.get(`${key}:reached:2`).promise;
    expect((await t.client.get(handle.id))?.progress).toEqual({ i: 2, of: 2 });
    gates.open(`${key}:go:2`);
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ done: 2 });
    expect(await t.client.get(handle.id)).toMatchObject({ state: 'completed', progress: { i: 2, of: 2 } });
  });

  it('a run that never reports has no progress, and no progress fields in its record', async () => {
    const key = unique('silent');
    const handle = await t.client.enqueue(SilentWorkflow, { key });
    gates.open(`${key}:go`);
    await handle.result({ timeoutMs: 10_000 });
    const info = await t.client.get(handle.id);
    expect(info?.state).toBe('completed');
    expect(info && 'progress' in info).toBe(false);
    expect(await redis.hmget(keys.run(handle.id), 'progress', 'progressSeq')).toEqual([null, null]);
  });

  it('a waiter with onProgress receives every value in order, then the result', async () => {
    const key = unique('waiter');
    const seen: unknown[] = [];
    // The run reports step i only after the previous one was seen, so none can be skipped.
    const result = await t.client.run(
      StepperWorkflow,
      { key, count: 3 },
      {
        timeoutMs: 10_000,
        onProgress: (value) => {
          seen.push(value);
          gates.open(`${key}:go:${(value as { i: number }).i}`);
        },
      },
    );
    expect(result).toEqual({ done: 3 });
    expect(seen).toEqual([
      { i: 1, of: 3 },
      { i: 2, of: 3 },
      { i: 3, of: 3 },
    ]);
  });

  it('a waiter that subscribes mid-run gets the current value first, then the later ones; nothing after it settled', async () => {
    const key = unique('mid');
    const handle = await t.client.enqueue(StepperWorkflow, { key, count: 3 });
    await gates.get(`${key}:reached:1`).promise;
    gates.open(`${key}:go:1`);
    await gates.get(`${key}:reached:2`).promise;
    const seen: unknown[] = [];
    const first = deferred();
    const waited = handle.result({
      timeoutMs: 10_000,
      onProgress: (value) => {
        seen.push(value);
        first.resolve();
      },
    });
    await first.promise;
    expect(seen).toEqual([{ i: 2, of: 3 }]);
    gates.open(`${key}:go:2`);
    await gates.get(`${key}:reached:3`).promise;
    gates.open(`${key}:go:3`);
    expect(await waited).toEqual({ done: 3 });
    expect(seen).toEqual([
      { i: 2, of: 3 },
      { i: 3, of: 3 },
    ]);

    // Waiting on the finished run: its stored value, then the result.
    const late: unknown[] = [];
    expect(await t.client.wait(handle.id, { onProgress: (value) => late.push(value) })).toEqual({ done: 3 });
    expect(late).toEqual([{ i: 3, of: 3 }]);
  });

  it('throttles: 100 rapid calls take a few writes, and the last value is stored and delivered', async () => {
    const key = unique('burst');
    const seen: number[] = [];
    const result = await t.client.run(
      BurstWorkflow,
      { key, calls: 100 },
      { id: key, timeoutMs: 10_000, onProgress: (value) => seen.push(value as number) },
    );
    expect(result).toBe('ok');
    const span = burstSpans.get(key)!;
    // progressSeq counts the values stored: one write per 250 ms at most, plus the first.
    const writes = Number(await redis.hget(keys.run(key), 'progressSeq'));
    expect(writes).toBeGreaterThanOrEqual(1);
    expect(writes).toBeLessThanOrEqual(Math.floor(span / 250) + 2);
    expect(writes).toBeLessThan(10);
    expect((await t.client.get(key))?.progress).toBe(100);
    // Whatever was delivered is in order, ends with the last value, and is no more than was written.
    expect(seen[seen.length - 1]).toBe(100);
    expect([...seen].sort((a, b) => a - b)).toEqual(seen);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.length).toBeLessThanOrEqual(writes);
  });

  it('a value still waiting for its slot when the run returns is written before the outcome', async () => {
    const handle = await t.client.enqueue(LastValueWorkflow, { n: 1 });
    expect(await handle.result({ timeoutMs: 10_000 })).toBe('ok');
    expect((await t.client.get(handle.id))?.progress).toEqual({ pct: 'last' });
    expect(await redis.hget(keys.run(handle.id), 'progressSeq')).toBe('2');
  });

  it('refuses bad values with typed errors before any write', async () => {
    const handle = await t.client.enqueue(BadValuesWorkflow, null);
    expect(await handle.result({ timeoutMs: 10_000 })).toBe('ok');
    const outcomes = badOutcomes.get(handle.id)!;
    expect(outcomes.map((o) => (o as Error).constructor.name)).toEqual([
      'PayloadNotSerializableError',
      'PayloadNotSerializableError',
      'PayloadNotSerializableError',
      'PayloadNotSerializableError',
      'PayloadNotSerializableError',
      'PayloadTooLargeError',
    ]);
    expect(outcomes.slice(0, 5).every((o) => o instanceof PayloadNotSerializableError)).toBe(true);
    expect(outcomes[5]).toBeInstanceOf(PayloadTooLargeError);
    expect((outcomes[3] as Error).message).toMatch(/^progress\.self: circular/);
    expect(await redis.hmget(keys.run(handle.id), 'progress', 'progressSeq')).toEqual([null, null]);
  });

  it('only a waiter with onProgress subscribes to the progress channel, and it unsubscribes when done', async () => {
    const key = unique('subs');
    const handle = await t.client.enqueue(StepperWorkflow, { key, count: 1 });
    await gates.get(`${key}:reached:1`).promise;
    const plain = handle.result({ timeoutMs: 10_000 });
    await pollUntil(
      () => numsub(keys.done(handle.id)),
      (n) => n === 1,
      'the plain waiter subscribed',
    );
    expect(await numsub(keys.progress(handle.id))).toBe(0);

    const seen: unknown[] = [];
    const first = deferred();
    const watching = handle.result({
      timeoutMs: 10_000,
      onProgress: (value) => {
        seen.push(value);
        first.resolve();
      },
    });
    await first.promise; // delivered from its first read, which follows the subscription
    expect(await numsub(keys.progress(handle.id))).toBe(1);
    gates.open(`${key}:go:1`);
    expect(await Promise.all([plain, watching])).toEqual([{ done: 1 }, { done: 1 }]);
    await pollUntil(
      () => numsub(keys.progress(handle.id)),
      (n) => n === 0,
      'the progress channel unsubscribed',
    );
    expect(seen).toEqual([{ i: 1, of: 1 }]);
  });

  it('a throwing onProgress does not break the wait', async () => {
    const key = unique('throws');
    const calls: unknown[] = [];
    const result = await t.client.run(
      StepperWorkflow,
      { key, count: 2 },
      {
        timeoutMs: 10_000,
        onProgress: (value) => {
          calls.push(value);
          gates.open(`${key}:go:${(value as { i: number }).i}`);
          throw new Error('a bug in the callback');
        },
      },
    );
    expect(result).toEqual({ done: 2 });
    expect(calls).toEqual([
      { i: 1, of: 2 },
      { i: 2, of: 2 },
    ]);
  });

  it('onProgress must be a function: typed error before any Redis call, nothing written', async () => {
    const id = unique('bad-opt');
    await expect(t.client.wait(id, { onProgress: 42 as unknown as () => void })).rejects.toThrow(InvalidOptionError);
    await expect(t.client.run(StepperWorkflow, { key: id, count: 1 }, { id, onProgress: 'no' as unknown as () => void })).rejects.toThrow(
      InvalidOptionError,
    );
    expect(await redis.exists(keys.run(id))).toBe(0);
  });

  it('the progress script writes only for the lease holder (token-checked), and a repeated value is not stored again', async () => {
    const key = unique('token');
    const handle = await t.client.enqueue(StepperWorkflow, { key, count: 1 });
    await gates.get(`${key}:reached:1`).promise;
    const runKey = keys.run(handle.id);
    const token = (await redis.hget(runKey, 'token'))!;
    const connection = redis.duplicate();
    const scripts = scriptsOn(connection);
    try {
      const progress = (tok: string, value: string) => scripts.run<number>('progress', [runKey], [keys.base, handle.id, tok, value]);
      expect(await progress('not-the-token', '"stale"')).toBe(0);
      expect(await redis.hmget(runKey, 'progress', 'progressSeq')).toEqual(['{"i":1,"of":1}', '1']);
      expect(await progress(token, '"fresh"')).toBe(1);
      expect(await progress(token, '"fresh"')).toBe(1); // a retry after a lost reply
      expect(await redis.hmget(runKey, 'progress', 'progressSeq')).toEqual(['"fresh"', '2']);
      gates.open(`${key}:go:1`);
      await handle.result({ timeoutMs: 10_000 });
      expect(await progress(token, '"after the end"')).toBe(0);
      expect(await redis.hget(runKey, 'progress')).toBe('"fresh"');
    } finally {
      connection.disconnect();
    }
  });

  it('the testing harness records the same values and the same errors', async () => {
    const production = await t.client.enqueue(LastValueWorkflow, { n: 2 });
    await production.result({ timeoutMs: 10_000 });
    const local = await SluiceTesting.harness(t.app.get(LastValueWorkflow)).run({ n: 2 });
    expect(local.attempts[0].progress).toEqual([{ pct: 10, at: new Date(1000) }, { pct: 20, at: new Date(2000) }, { pct: 'last' }]);
    expect(local.progress).toEqual({ pct: 'last' });
    expect(local.progress).toEqual((await t.client.get(production.id))?.progress);

    const bad = await t.client.enqueue(BadValuesWorkflow, null);
    await bad.result({ timeoutMs: 10_000 });
    const localBad = await SluiceTesting.harness(t.app.get(BadValuesWorkflow)).run(null, { id: unique('bad-local') });
    expect(localBad.state).toBe('completed');
    expect(localBad.attempts[0].progress).toEqual([]);
    expect('progress' in localBad).toBe(false);
    const describe = (outcomes: unknown[]) => outcomes.map((o) => [(o as Error).constructor.name, (o as Error).message]);
    expect(describe(badOutcomes.get(localBad.runId)!)).toEqual(describe(badOutcomes.get(bad.id)!));
  });
});
