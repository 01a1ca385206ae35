import type Redis from 'ioredis';
import { ChildWorkflowFailedError, InvokeOptions, RunContext, Workflow } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter, Gates, pollUntil } from '../support/workflows';

/**
 * Child workflows (ctx.invoke, ctx.invokeAll): results and failures, cancels in both directions,
 * replays that never start a child twice, explicit ids, and a fan-out of 50.
 */
const effects = new Counter();
const holds = new Gates();

interface ChildInput {
  n: number;
  fail?: boolean;
  hold?: string;
  sleepMs?: number;
}

@Workflow('wc.child', { attempts: 1 })
class Child {
  async run(input: ChildInput, ctx: RunContext) {
    effects.inc(`child:${ctx.runId}`);
    if (input.hold) await holds.get(input.hold).promise;
    if (input.sleepMs) await ctx.sleep('nap', input.sleepMs);
    await ctx.step('after-hold', () => effects.inc(`after-hold:${ctx.runId}`));
    if (input.fail) throw new Error(`child ${input.n} broke`);
    return input.n * 2;
  }
}

/** Invokes one child; reports a failure it catches. */
@Workflow('wc.one', { attempts: 3, backoff: { delayMs: 10 } })
class One {
  async run(input: { child: ChildInput; opts?: InvokeOptions; rethrow?: boolean }, ctx: RunContext) {
    try {
      return { result: await ctx.invoke(Child, input.child, input.opts) };
    } catch (error) {
      if (input.rethrow || !(error instanceof ChildWorkflowFailedError)) throw error;
      return {
        childId: error.childId,
        state: error.state,
        childError: { name: error.childError?.name, message: error.childError?.message },
      };
    }
  }
}

/** A step after the invoke fails once: the retry must replay the child's result. */
@Workflow('wc.replay', { attempts: 2, backoff: { delayMs: 10 } })
class Replay {
  async run(input: { n: number }, ctx: RunContext) {
    const doubled = await ctx.invoke(Child, { n: input.n });
    const seen = await ctx.step('after', () => {
      if (effects.inc(`after:${ctx.runId}`) === 1) throw new Error('the step after the invoke fails once');
      return doubled;
    });
    return { doubled, seen, attempt: ctx.attempt };
  }
}

/** A middle run: waits for a child of its own. */
@Workflow('wc.mid', { attempts: 1 })
class Mid {
  async run(input: { hold: string }, ctx: RunContext) {
    return ctx.invoke(Child, { n: 100, hold: input.hold });
  }
}

@Workflow('wc.tree', { attempts: 1 })
class Tree {
  async run(input: { hold: string }, ctx: RunContext) {
    const out = await ctx.invokeAll([
      { workflow: Child, input: { n: 1, hold: input.hold } },
      { workflow: 'wc.child', input: { n: 2, sleepMs: 3_600_000 } },
      { workflow: Mid, input: { hold: input.hold } },
    ]);
    await ctx.step('after-children', () => effects.inc(`after-children:${ctx.runId}`));
    return out;
  }
}

@Workflow('wc.fanout', { attempts: 1 })
class Fanout {
  async run(input: { count: number; hold: string }, ctx: RunContext) {
    const results = await ctx.invokeAll<number>(
      Array.from({ length: input.count }, (_, n) => ({ workflow: Child, input: { n, hold: input.hold } })),
    );
    return results;
  }
}

describe('durable waits: child workflows', () => {
  const ns = uniqueNamespace('wch');
  let redis: Redis;
  let worker: TestApp;
  let producer: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Child, One, Replay, Mid, Tree, Fanout], { namespace: ns, worker: { concurrency: 64 } });
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
  });
  afterAll(async () => {
    holds.openAll();
    await worker.close();
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const get = (id: string) => producer.client.get(id);
  const inState = (id: string, state: string) =>
    pollUntil(
      () => get(id),
      (run) => run?.state === state,
      `${id} ${state}`,
    );
  const childOf = (parent: string, n = 1) => `${parent}/invoke:wc.child#${n}`;

  it("a child's result; the child is linked to its parent by id and ran once", async () => {
    const parent = await producer.client.enqueue('wc.one', { child: { n: 21 } });
    expect(await parent.result({ timeoutMs: 10_000 })).toEqual({ result: 42 });
    const child = await get(childOf(parent.id));
    expect(child).toMatchObject({ state: 'completed', workflow: 'wc.child', result: 42, input: { n: 21 } });
    expect(effects.get(`child:${childOf(parent.id)}`)).toBe(1);
    expect((await get(parent.id))?.attempts).toBe(2);
  });

  it('a failed child is ChildWorkflowFailedError in the parent (state, childError); the child honours its attempts', async () => {
    const parent = await producer.client.enqueue('wc.one', { child: { n: 3, fail: true }, opts: { attempts: 2 } });
    expect(await parent.result({ timeoutMs: 10_000 })).toEqual({
      childId: childOf(parent.id),
      state: 'failed',
      childError: { name: 'Error', message: 'child 3 broke' },
    });
    expect(effects.get(`child:${childOf(parent.id)}`)).toBe(2);
    expect(await get(childOf(parent.id))).toMatchObject({ state: 'failed', maxAttempts: 2, failures: 2 });
  });

  it('a child failure the parent does not catch fails it for good (a retry would only replay it), never running the child again', async () => {
    const parent = await producer.client.enqueue('wc.one', { child: { n: 4, fail: true }, rethrow: true });
    await expect(parent.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ causeName: 'ChildWorkflowFailedError' });
    const info = await get(parent.id);
    expect(info).toMatchObject({ state: 'failed', failures: 1, error: expect.objectContaining({ name: 'ChildWorkflowFailedError' }) });
    expect(effects.get(`child:${childOf(parent.id)}`)).toBe(1);
  });

  it('cancelling a child (active, or in a sleep of its own) resumes the parent with state "cancelled"', async () => {
    const active = await producer.client.enqueue('wc.one', { child: { n: 5, hold: 'cancel-child' } });
    const sleeping = await producer.client.enqueue('wc.one', { child: { n: 6, sleepMs: 3_600_000 } });
    await inState(childOf(active.id), 'active');
    await inState(childOf(sleeping.id), 'sleeping');
    await inState(active.id, 'waiting-child');
    expect(await producer.client.cancel(childOf(active.id), { reason: 'not needed' })).toEqual({
      cancelled: true,
      state: 'active',
      children: 0,
    });
    expect(await producer.client.cancel(childOf(sleeping.id))).toEqual({ cancelled: true, state: 'sleeping', children: 0 });
    expect(await active.result({ timeoutMs: 10_000 })).toEqual({
      childId: childOf(active.id),
      state: 'cancelled',
      childError: { name: 'RunCancelledError', message: 'cancelled: not needed' },
    });
    expect(await sleeping.result({ timeoutMs: 10_000 })).toMatchObject({ state: 'cancelled', childError: { name: 'RunCancelledError' } });
    holds.open('cancel-child');
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(effects.get(`after-hold:${childOf(active.id)}`)).toBe(0);
  });

  it('a parent attempt that fails after invoke returned: the retry replays the memoized result, no second child', async () => {
    const parent = await worker.client.enqueue('wc.replay', { n: 8 }); // its attempts: 2
    // Claims: 1 (invoke, suspends), 2 (resumed, the step after fails), 3 (retry: replays, completes).
    expect(await parent.result({ timeoutMs: 10_000 })).toEqual({ doubled: 16, seen: 16, attempt: 3 });
    expect(effects.get(`child:${childOf(parent.id)}`)).toBe(1);
    expect(effects.get(`after:${parent.id}`)).toBe(2);
    expect(await get(parent.id)).toMatchObject({ state: 'completed', failures: 1, attempts: 3, maxAttempts: 2 });
    expect(await get(childOf(parent.id, 2))).toBeNull();
    expect(await redis.exists(`{sluice:${ns}}:run:${childOf(parent.id, 2)}`)).toBe(0);
  });

  it('cancelling a parent waiting on children cancels them, and theirs in turn', async () => {
    const parent = await producer.client.enqueue('wc.tree', { hold: 'tree' });
    const [c1, c2, mid] = [childOf(parent.id, 1), childOf(parent.id, 2), `${parent.id}/invoke:wc.mid#1`];
    const grandchild = childOf(mid);
    await inState(parent.id, 'waiting-child');
    expect((await get(parent.id))?.waitingFor).toEqual({ kind: 'child', step: 'invoke:wc.child', runIds: [c1, c2, mid] });
    await inState(c1, 'active');
    await inState(c2, 'sleeping');
    await inState(mid, 'waiting-child');
    await inState(grandchild, 'active');
    expect(await producer.client.cancel(parent.id, { reason: 'tree down' })).toEqual({
      cancelled: true,
      state: 'waiting-child',
      children: 4,
    });
    for (const id of [parent.id, c1, c2, mid, grandchild]) {
      expect({ id, state: (await get(id))?.state }).toEqual({ id, state: 'cancelled' });
    }
    holds.open('tree');
    await new Promise((resolve) => setTimeout(resolve, 100));
    for (const id of [c1, grandchild]) expect(effects.get(`after-hold:${id}`)).toBe(0);
    expect(effects.get(`after-children:${parent.id}`)).toBe(0);
    // A second cancel finds it finished.
    expect(await producer.client.cancel(parent.id)).toEqual({ cancelled: false, state: 'cancelled', children: 0 });
  });

  it('an explicit child id that belongs to another parent fails the parent for good with ChildRunConflictError', async () => {
    const first = await producer.client.enqueue('wc.one', { child: { n: 9, hold: 'shared' }, opts: { id: 'wch-shared-1' } });
    await inState('wch-shared-1', 'active');
    const second = await producer.client.enqueue('wc.one', { child: { n: 10 }, opts: { id: 'wch-shared-1' } });
    await expect(second.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ causeName: 'ChildRunConflictError' });
    // Not retried although the parent has 3 attempts; nothing written to the child.
    expect(await get(second.id)).toMatchObject({
      state: 'failed',
      attempts: 1,
      failures: 1,
      error: expect.objectContaining({ name: 'ChildRunConflictError' }),
    });
    expect(await get('wch-shared-1')).toMatchObject({ input: { n: 9 } });
    holds.open('shared');
    expect(await first.result({ timeoutMs: 10_000 })).toEqual({ result: 18 });
    // Finished, it still belongs to the first parent.
    const third = await producer.client.enqueue('wc.one', { child: { n: 11 }, opts: { id: 'wch-shared-1' } });
    await expect(third.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ causeName: 'ChildRunConflictError' });
    expect(effects.get('child:wch-shared-1')).toBe(1);
  });

  it('an explicit child id of a run without a parent: adopted and waited for (unfinished), or its outcome taken (finished)', async () => {
    const solo = await producer.client.enqueue('wc.child', { n: 12, hold: 'solo' }, { id: 'wch-solo-1' });
    await inState(solo.id, 'active');
    const parent = await producer.client.enqueue('wc.one', { child: { n: 999 }, opts: { id: 'wch-solo-1' } });
    await inState(parent.id, 'waiting-child');
    holds.open('solo');
    expect(await parent.result({ timeoutMs: 10_000 })).toEqual({ result: 24 });
    expect(effects.get('child:wch-solo-1')).toBe(1);

    await producer.client.run('wc.child', { n: 13 }, { id: 'wch-solo-2', timeoutMs: 10_000 });
    const adopter = await producer.client.enqueue('wc.one', { child: { n: 999 }, opts: { id: 'wch-solo-2' } });
    expect(await adopter.result({ timeoutMs: 10_000 })).toEqual({ result: 26 });
    // Its outcome was there: the wait ended at once, without suspending the parent.
    expect((await get(adopter.id))?.attempts).toBe(1);
    expect(effects.get('child:wch-solo-2')).toBe(1);
  });

  it('invokeAll of 50 children: all started at once, results in call order, each child once', async () => {
    const parent = await producer.client.enqueue('wc.fanout', { count: 50, hold: 'fan' });
    await inState(parent.id, 'waiting-child');
    const waiting = await get(parent.id);
    expect(waiting?.waitingFor).toEqual({
      kind: 'child',
      step: 'invoke:wc.child',
      runIds: Array.from({ length: 50 }, (_, i) => childOf(parent.id, i + 1)),
    });
    expect((await producer.client.stats({ workflow: 'wc.fanout' })).workflows['wc.fanout'].waitingChild).toBe(1);
    await pollUntil(
      () => producer.client.stats({ workflow: 'wc.child' }),
      (s) => s.workflows['wc.child'].active >= 50,
      '50 children running',
    );
    holds.open('fan');
    expect(await parent.result({ timeoutMs: 15_000 })).toEqual(Array.from({ length: 50 }, (_, n) => n * 2));
    for (let i = 1; i <= 50; i++) expect(effects.get(`child:${childOf(parent.id, i)}`)).toBe(1);
    expect((await get(parent.id))?.attempts).toBe(2);
  });

  it('the namespace is consistent at rest', async () => {
    await pollUntil(
      () => producer.client.stats(),
      (s) => Object.values(s.workflows).every((w) => w.active === 0),
      'no run active',
    );
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });
});
