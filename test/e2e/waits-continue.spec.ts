import type Redis from 'ioredis';
import { InvalidInputError, RunContext, Workflow } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { pollUntil } from '../support/workflows';

/**
 * `ctx.continueAsNew(input)`: a long-lived loop keeps a bounded memo. Each incarnation's steps,
 * sleeps and position entries go with it (lua/continue.lua), so a loop of 500 iterations under a
 * 4 KiB memo budget — which the same loop without continueAsNew overruns within about 130 sleeps
 * (see waits-memo.spec.ts) — completes, and its waiter gets the last incarnation's result.
 */
const BUDGET = 4096;

interface PollState {
  i: number;
  n: number;
  seen: number;
}

@Workflow('wc.poller', { attempts: 2 })
class Poller {
  async run(input: PollState, ctx: RunContext<PollState>) {
    const got = await ctx.step('poll', () => input.i);
    await ctx.sleep('nap', 1);
    if (input.i + 1 < input.n) return ctx.continueAsNew({ i: input.i + 1, n: input.n, seen: input.seen + got });
    return { iterations: input.i + 1, seen: input.seen + got, attempt: ctx.attempt };
  }
}

@Workflow('wc.child', { attempts: 1 })
class Child {
  async run(input: { i: number }) {
    return input.i * 10;
  }
}

/** A loop that invokes a child per incarnation: each incarnation gets its own child, not an earlier one's result. */
@Workflow('wc.parent', { attempts: 1 })
class Parent {
  async run(input: { i: number; results: number[] }, ctx: RunContext<{ i: number; results: number[] }>) {
    const result = await ctx.invoke(Child, { i: input.i });
    const results = [...input.results, result];
    if (input.i < 3) return ctx.continueAsNew({ i: input.i + 1, results });
    return results;
  }
}

@Workflow('wc.inside-step', { attempts: 3 })
class InsideStep {
  async run(input: number, ctx: RunContext<number>) {
    await ctx.step('bad', () => ctx.continueAsNew(input + 1));
    return 'unreachable';
  }
}

describe('ctx.continueAsNew', () => {
  const ns = uniqueNamespace('wcn');
  let redis: Redis;
  let app: TestApp;
  const runKey = (id: string) => `{sluice:${ns}}:run:${id}`;

  beforeAll(async () => {
    redis = rawRedis();
    app = await createApp([Poller, Child, Parent, InsideStep], { namespace: ns, worker: { concurrency: 4 }, maxRunMemoBytes: BUDGET });
  });
  afterAll(async () => {
    await app.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const memoBytes = async (id: string) => {
    const fields = await redis.hgetall(runKey(id));
    return Object.entries(fields)
      .filter(([key]) => key.startsWith('step:'))
      .reduce((n, [key, value]) => n + Buffer.byteLength(key.slice(5)) + Buffer.byteLength(value), 0);
  };

  it('a loop of 500 iterations completes with a bounded memo, and its waiter gets the last incarnation’s result', async () => {
    const n = 500;
    const result = await app.client.run(Poller, { i: 0, n, seen: 0 }, { id: 'poller-1', timeoutMs: 120_000 });
    // Sum of 0..499; the last incarnation was claimed twice (before and after its sleep).
    expect(result).toEqual({ iterations: n, seen: (n * (n - 1)) / 2, attempt: 2 });
    const info = await app.client.get('poller-1');
    expect(info).toMatchObject({ state: 'completed', attempts: 2, failures: 0 });
    // Only the last incarnation's memo is left: its step, its sleep, and their position entries.
    const fields = await redis.hgetall(runKey('poller-1'));
    expect(
      Object.keys(fields)
        .filter((key) => key.startsWith('step:'))
        .sort(),
    ).toEqual(['step:@0', 'step:@1', 'step:nap#1', 'step:poll#1']);
    expect(await memoBytes('poller-1')).toBeLessThan(100);
    expect(fields.gen).toBe(String(n - 1));
    // The record itself stays small: no timeline or memo of an earlier incarnation is kept.
    expect(Object.keys(fields).length).toBeLessThan(40);
  }, 180_000);

  it('each incarnation invokes its own children (their derived ids carry the incarnation)', async () => {
    const results = await app.client.run(Parent, { i: 0, results: [] }, { id: 'parent-1', timeoutMs: 30_000 });
    expect(results).toEqual([0, 10, 20, 30]);
    expect(await app.client.get('parent-1/invoke:wc.child#1')).toMatchObject({ state: 'completed', result: 0 });
    expect(await app.client.get('parent-1/invoke:wc.child#1@3')).toMatchObject({ state: 'completed', result: 30 });
  });

  it('inside a step it is an InvalidInputError that fails the run without retry, and nothing continues', async () => {
    const error = await app.client.run(InsideStep, 1, { id: 'inside-1', timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ causeName: InvalidInputError.name });
    const info = await app.client.get('inside-1');
    expect(info).toMatchObject({ state: 'failed', attempts: 1, failures: 1 });
    expect(await redis.hget(runKey('inside-1'), 'gen')).toBeNull();
  });

  it('the namespace is consistent at rest', async () => {
    await pollUntil(
      () => app.client.stats(),
      (s) => Object.values(s.workflows).every((w) => w.active === 0),
      'no run active',
    );
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });
});
