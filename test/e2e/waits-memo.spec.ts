import type Redis from 'ioredis';
import { RunContext, Workflow } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { pollUntil } from '../support/workflows';

/**
 * The run memo budget (maxRunMemoBytes) with durable waits: a wait's outcome (a signal's or an
 * event's payload, a child's result) joins the step memo, which is shipped with every claim — and
 * a run in a wait loop is claimed once per wait. The budget exists to bound that.
 */
const BUDGET = 4096;

@Workflow('wm.loop', { attempts: 1 })
class Loop {
  async run(input: { n: number }, ctx: RunContext) {
    let total = 0;
    for (let i = 0; i < input.n; i++) {
      const got = await ctx.waitForSignal<string>('tick');
      total += got.timedOut ? 0 : got.payload.length;
    }
    await ctx.step('after', () => 1);
    return total;
  }
}

/** Sleeps in a loop: each adds a position entry (at its suspend) and an outcome (at its promotion). */
@Workflow('wm.sleeps', { attempts: 3 })
class Sleeps {
  async run(input: { n: number }, ctx: RunContext) {
    for (let i = 0; i < input.n; i++) await ctx.sleep('tick', 1);
    return input.n;
  }
}

/** A step, an hour's sleep, a step: the sleep's deadline is moved by hand in the test. */
@Workflow('wm.nap', { attempts: 1 })
class Nap {
  async run(_input: unknown, ctx: RunContext) {
    const before = await ctx.step('before', () => 'b');
    await ctx.sleep('nap', '1h');
    return `${before}-${await ctx.step('after', () => 'a')}`;
  }
}

describe('durable waits: the run memo budget', () => {
  const ns = uniqueNamespace('wmb');
  let redis: Redis;
  let app: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    app = await createApp([Loop, Sleeps, Nap], {
      namespace: ns,
      worker: { concurrency: 2 },
      maxRunMemoBytes: BUDGET,
      maxPayloadBytes: 2048,
    });
  });
  afterAll(async () => {
    await app.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const memoBytes = async (id: string) => {
    const fields = await redis.hgetall(`{sluice:${ns}}:run:${id}`);
    return Object.entries(fields)
      .filter(([key]) => key.startsWith('step:'))
      .reduce((n, [key, value]) => n + Buffer.byteLength(key.slice(5)) + Buffer.byteLength(value), 0);
  };

  /*
   * A wait's outcome is written by whoever ends the wait (signal.lua, send-event.lua, a child's
   * finishRun), not by the worker: the wait records the room its outcomes may take ('waitRoom'),
   * and one past it is recorded as refused, which fails the run at that wait with
   * StepMemoLimitError. (Before that, eight 1.5 KB signals took a 4 KB memo to ~12 KB and the budget
   * struck only at the next step, blaming a 22-byte result.)
   */
  it('signal payloads do not take the memo past maxRunMemoBytes: the wait that would fails the run', async () => {
    const run = await app.client.enqueue('wm.loop', { n: 8 });
    for (let i = 0; i < 8; i++) {
      const info = await pollUntil(
        () => app.client.get(run.id),
        (r) => r?.state === 'waiting-signal' || r?.state === 'failed' || r?.state === 'completed',
        'waiting or done',
      );
      if (info?.state !== 'waiting-signal') break;
      await app.client.signal(run.id, 'tick', 'x'.repeat(1500)).catch(() => undefined);
    }
    await pollUntil(
      () => app.client.get(run.id),
      (r) => r?.state === 'failed' || r?.state === 'completed' || r?.state === 'waiting-signal',
      'the run settled',
    );
    expect(await memoBytes(run.id)).toBeLessThanOrEqual(BUDGET);
    const info = await app.client.get(run.id);
    expect(info?.state).toBe('failed');
    expect(info?.error?.name).toBe('StepMemoLimitError');
    expect(info?.error?.message).toMatch(/the result of step "signal:tick#\d+"/);
  });

  /*
   * Issue 27: neither the position entries suspend.lua writes nor the {"t":1} a sleep's promotion
   * writes were counted, so 300 sleeps took a 2,000-byte budget's memo to 9,574 bytes and the run
   * completed. Now each counts, and the run fails at the sleep that would go over, without retry
   * (the same on every attempt). The memo ends within the budget plus the refusal marker of that
   * one sleep ({"x":<bytes>} under its key) at most.
   */
  it('sleeps in a loop do not take the memo past maxRunMemoBytes: the sleep that would fails the run', async () => {
    const run = await app.client.enqueue('wm.sleeps', { n: 300 });
    const info = await pollUntil(
      () => app.client.get(run.id),
      (r) => r?.state === 'failed' || r?.state === 'completed',
      'the run settled',
      60_000,
    );
    expect(info?.state).toBe('failed');
    expect(info?.error?.name).toBe('StepMemoLimitError');
    expect(info?.failures).toBe(1);
    expect(await memoBytes(run.id)).toBeLessThanOrEqual(BUDGET + Buffer.byteLength('tick#300{"x":9999}'));
  });

  /*
   * Data compatibility: the memo's layout did not change, and a sleep suspended by a version that
   * recorded no room ('waitRoom' absent) ends by its time without a bound, as it did there.
   */
  it('a sleep recorded without a room (an older version) resumes when its time comes', async () => {
    const run = await app.client.enqueue('wm.nap', null);
    await pollUntil(
      () => app.client.get(run.id),
      (r) => r?.state === 'sleeping',
      'sleeping',
    );
    const key = `{sluice:${ns}}:run:${run.id}`;
    const wait = (await redis.hget(key, 'wait')) as string;
    const [kind, , memoKey, target] = wait.split(' ');
    const now = Date.now() - 1000;
    await redis.hdel(key, 'waitRoom');
    await redis.hset(key, 'wait', `${kind} ${now} ${memoKey} ${target}`, 'dueAt', now);
    await redis.zadd(`{sluice:${ns}}:wf:wm.nap:sleeping`, now, run.id);
    await redis.zadd(`{sluice:${ns}}:wf:wm.nap:delayed`, now, run.id);
    // What a script that moves a due time earlier does: a wake marker for the workflow's workers.
    await redis.rpush(`{sluice:${ns}}:wf:wm.nap:wake`, '1');
    expect(await run.result({ timeoutMs: 10_000 })).toBe('b-a');
    expect(await redis.hget(key, 'step:nap#1')).toBe('{"t":1}');
  });

  it('the namespace is consistent at rest', async () => {
    await pollUntil(
      () => app.client.stats(),
      (s) => s.workflows['wm.loop'].active === 0 && s.workflows['wm.sleeps'].active === 0 && s.workflows['wm.nap'].active === 0,
      'no run active',
    );
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });
});
