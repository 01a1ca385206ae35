import type Redis from 'ioredis';
import { RunContext, Step, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter } from '../support/workflows';

/** Executions of each step body, by `${runId}:${what}`, counted in this process. */
const counts = new Counter();
/** What each attempt of a run saw, by run id. */
const seen = new Map<string, Array<{ attempt: number; a: string; b: string }>>();
const fast = { delayMs: 10 };

/**
 * Step A calls step B inside it, then B is called again at the top level. On the first attempt
 * either the run throws after both, or the top-level B itself throws, so the run is retried with
 * A replayed from the memo (and its nested B therefore not called at all).
 */
@Workflow('nested.at-step', { attempts: 3, backoff: fast })
class NestedStepWorkflow {
  async run(input: { failTopOnce: boolean }, ctx: RunContext): Promise<{ a: string; b: string }> {
    counts.inc(`${ctx.runId}:run`);
    const a = await this.stepA(ctx.runId);
    const b = await this.stepB(ctx.runId, 'top', input.failTopOnce && ctx.attempt === 1);
    seen.set(ctx.runId, [...(seen.get(ctx.runId) ?? []), { attempt: ctx.attempt, a, b }]);
    if (ctx.attempt === 1) throw new Error('retry after the steps');
    return { a, b };
  }

  @Step() async stepA(runId: string): Promise<string> {
    const n = counts.inc(`${runId}:A`);
    return `A${n}(${await this.stepB(runId, 'inner', false)})`;
  }

  @Step() async stepB(runId: string, caller: 'inner' | 'top', fail: boolean): Promise<string> {
    const n = counts.inc(`${runId}:B:${caller}`);
    if (fail) throw new Error('top-level B failed once');
    return `B:${caller}${n}`;
  }
}

/** `ctx.step` nested in a `@Step` (two levels deep), then the same inline names at the top level. */
@Workflow('nested.inline', { attempts: 3, backoff: fast })
class NestedInlineWorkflow {
  async run(_input: null, ctx: RunContext): Promise<{ outer: string; inner: string; deeper: string }> {
    counts.inc(`${ctx.runId}:run`);
    const outer = await this.outer(ctx);
    const inner = await ctx.step('inner', () => `inner:top${counts.inc(`${ctx.runId}:inner:top`)}`);
    const deeper = await ctx.step('deeper', () => `deeper:top${counts.inc(`${ctx.runId}:deeper:top`)}`);
    if (ctx.attempt === 1) throw new Error('retry after the steps');
    return { outer, inner, deeper };
  }

  @Step() async outer(ctx: RunContext): Promise<string> {
    counts.inc(`${ctx.runId}:outer`);
    const inner = await ctx.step('inner', async () => {
      const deeper = await ctx.step('deeper', () => `deeper:nested${counts.inc(`${ctx.runId}:deeper:nested`)}`);
      return `inner:nested${counts.inc(`${ctx.runId}:inner:nested`)}[${deeper}]`;
    });
    return `outer(${inner})`;
  }
}

/** Two steps of the same name started side by side at the top level: both stay memoized steps. */
@Workflow('nested.parallel', { attempts: 3, backoff: fast })
class ParallelStepsWorkflow {
  async run(_input: null, ctx: RunContext): Promise<string[]> {
    counts.inc(`${ctx.runId}:run`);
    const both = await Promise.all([this.par(ctx.runId, 'x'), this.par(ctx.runId, 'y')]);
    if (ctx.attempt === 1) throw new Error('retry after the steps');
    return both;
  }

  @Step() async par(runId: string, which: string): Promise<string> {
    await new Promise((resolve) => setTimeout(resolve, which === 'x' ? 20 : 0)); // overlap them
    return `${which}${counts.inc(`${runId}:par:${which}`)}`;
  }
}

describe('steps nested in steps', () => {
  let t: TestApp;
  let namespace: string;
  let redis: Redis;
  const timeoutMs = 10_000;

  beforeAll(async () => {
    namespace = uniqueNamespace('nested');
    t = await createApp([NestedStepWorkflow, NestedInlineWorkflow, ParallelStepsWorkflow], { namespace });
    redis = rawRedis();
  });
  afterAll(async () => {
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  /** The step keys of a run's memo in Redis (its `step:<name>#<n>` fields). */
  async function memoKeys(id: string): Promise<string[]> {
    const fields = await redis.hkeys(new RedisKeys('sluice', namespace).run(id));
    return fields
      .filter((field) => field.startsWith('step:') && !field.startsWith('step:@'))
      .map((field) => field.slice('step:'.length))
      .sort();
  }

  it('a @Step called inside another runs as part of it, so the later top-level call keeps its own memo entry on retry', async () => {
    const handle = await t.client.enqueue(NestedStepWorkflow, { failTopOnce: false });
    const id = handle.id;
    const out = await handle.result({ timeoutMs });

    expect(counts.get(`${id}:run`)).toBe(2);
    expect(counts.get(`${id}:A`)).toBe(1);
    expect(counts.get(`${id}:B:inner`)).toBe(1); // only when A executed; A's replay does not call it
    expect(counts.get(`${id}:B:top`)).toBe(1);
    // The retry replayed the top-level B with its own value, not the nested call's.
    expect(seen.get(id)).toEqual([
      { attempt: 1, a: 'A1(B:inner1)', b: 'B:top1' },
      { attempt: 2, a: 'A1(B:inner1)', b: 'B:top1' },
    ]);
    expect(out).toEqual({ a: 'A1(B:inner1)', b: 'B:top1' });
    expect(await memoKeys(id)).toEqual(['stepA#1', 'stepB#1']);
  });

  it('a top-level step that failed after a nested call of the same name executes again on retry', async () => {
    const handle = await t.client.enqueue(NestedStepWorkflow, { failTopOnce: true });
    const id = handle.id;
    const out = await handle.result({ timeoutMs });

    expect(counts.get(`${id}:run`)).toBe(2);
    expect(counts.get(`${id}:A`)).toBe(1);
    expect(counts.get(`${id}:B:inner`)).toBe(1);
    expect(counts.get(`${id}:B:top`)).toBe(2); // failed on attempt 1, executed again on attempt 2
    expect(seen.get(id)).toEqual([{ attempt: 2, a: 'A1(B:inner1)', b: 'B:top2' }]);
    expect(out).toEqual({ a: 'A1(B:inner1)', b: 'B:top2' });
    expect(await memoKeys(id)).toEqual(['stepA#1', 'stepB#1']);
  });

  it('ctx.step nested in a @Step (at any depth) runs plainly as part of it', async () => {
    const handle = await t.client.enqueue(NestedInlineWorkflow, null);
    const id = handle.id;
    const out = await handle.result({ timeoutMs });

    expect(counts.get(`${id}:run`)).toBe(2);
    expect(['outer', 'inner:nested', 'deeper:nested', 'inner:top', 'deeper:top'].map((what) => counts.get(`${id}:${what}`))).toEqual([
      1, 1, 1, 1, 1,
    ]);
    expect(out).toEqual({ outer: 'outer(inner:nested1[deeper:nested1])', inner: 'inner:top1', deeper: 'deeper:top1' });
    expect(await memoKeys(id)).toEqual(['deeper#1', 'inner#1', 'outer#1']);
  });

  it('steps started in parallel at the top level are each memoized', async () => {
    const handle = await t.client.enqueue(ParallelStepsWorkflow, null);
    const id = handle.id;
    await expect(handle.result({ timeoutMs })).resolves.toEqual(['x1', 'y1']);
    expect(counts.get(`${id}:run`)).toBe(2);
    expect(counts.get(`${id}:par:x`)).toBe(1);
    expect(counts.get(`${id}:par:y`)).toBe(1);
    expect(await memoKeys(id)).toEqual(['par#1', 'par#2']);
  });
});
