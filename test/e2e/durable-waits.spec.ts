import type Redis from 'ioredis';
import { ChildWorkflowFailedError, RunContext, RunStateError, RunNotFoundError, Workflow, WaitOutcome } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter, Gates, pollUntil } from '../support/workflows';

/**
 * Durable waits in one process pair (a worker app, a producer app): each kind of wait gives up the
 * run's slot, resumes on its value or its time, and replays without executing its steps again.
 */
const effects = new Counter();
const reached = new Gates();

@Workflow('dw.sleeper', { concurrency: 1, attempts: 1 })
class Sleeper {
  async run(input: { ms: number }, ctx: RunContext) {
    await ctx.step('before', () => effects.inc(`before:${ctx.runId}`));
    await ctx.sleep('nap', input.ms);
    await ctx.step('after', () => effects.inc(`after:${ctx.runId}`));
    return ctx.attempt;
  }
}

@Workflow('dw.approval', { attempts: 1 })
class Approval {
  async run(input: { timeoutMs?: number }, ctx: RunContext): Promise<WaitOutcome<{ ok: boolean }>> {
    await ctx.step('asked', () => effects.inc(`asked:${ctx.runId}`));
    reached.open(ctx.runId);
    return ctx.waitForSignal<{ ok: boolean }>('approve', input.timeoutMs === undefined ? undefined : { timeoutMs: input.timeoutMs });
  }
}

@Workflow('dw.payment', { attempts: 1 })
class Payment {
  async run(input: { order: string }, ctx: RunContext) {
    const settled = await ctx.waitForEvent<{ amount: number }>('payment.settled', { key: input.order, timeoutMs: '1h' });
    return settled.timedOut ? -1 : settled.payload.amount;
  }
}

@Workflow('dw.child', { attempts: 1 })
class Child {
  async run(input: { n: number; fail?: boolean }, ctx: RunContext) {
    effects.inc(`child:${ctx.runId}`);
    if (input.fail) throw new Error(`child ${input.n} broke`);
    return input.n * 2;
  }
}

@Workflow('dw.parent', { concurrency: 1, attempts: 1 })
class Parent {
  async run(input: { fail?: boolean }, ctx: RunContext) {
    const one = await ctx.invoke(Child, { n: 1 });
    const all = await ctx
      .invokeAll<number>([
        { workflow: Child, input: { n: 2 } },
        { workflow: 'dw.child', input: { n: 3, fail: input.fail } },
      ])
      .catch((error: unknown) => (error instanceof ChildWorkflowFailedError ? [error.state, error.childError?.message] : ['other']));
    return { one, all };
  }
}

/** Two branches whose steps reach the recorder in the order their other I/O finished: swapped on the replay. */
const slowFirst = new Map<string, 'a' | 'b'>();
const callOrder: string[] = [];
const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

@Workflow('dw.parallel', { attempts: 1 })
class Parallel {
  async run(_input: unknown, ctx: RunContext) {
    const slow = slowFirst.get(ctx.runId) ?? 'b';
    const branch = async (name: 'a' | 'b') => {
      await tick(name === slow ? 30 : 0);
      callOrder.push(`${ctx.attempt}:${name}`);
      return ctx.step(name, () => effects.inc(`${name}:${ctx.runId}`));
    };
    await Promise.all([branch('a'), branch('b')]);
    slowFirst.set(ctx.runId, slow === 'a' ? 'b' : 'a');
    await ctx.sleep('between', 10);
    return ctx.step('last', () => effects.inc(`last:${ctx.runId}`));
  }
}

describe('durable waits', () => {
  const ns = uniqueNamespace('dw');
  let redis: Redis;
  let worker: TestApp;
  let producer: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Sleeper, Approval, Payment, Child, Parent, Parallel], { namespace: ns, worker: { concurrency: 4 } });
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
  });
  afterAll(async () => {
    await worker.close();
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('a sleep frees the slot of a cap-1 workflow, shows as sleeping, and replays its steps once', async () => {
    const long = await producer.client.enqueue('dw.sleeper', { ms: 1500 });
    const info = await pollUntil(
      () => producer.client.get(long.id),
      (run) => run?.state === 'sleeping',
      'the run sleeps',
    );
    expect(info?.waitingFor).toEqual({ kind: 'sleep', step: 'nap', until: expect.any(Date) });
    expect((await producer.client.stats()).workflows['dw.sleeper']).toEqual(
      expect.objectContaining({ sleeping: 1, delayed: 0, active: 0 }),
    );
    expect((await producer.client.listRuns({ workflow: 'dw.sleeper', state: 'sleeping' })).runs.map((run) => run.id)).toEqual([long.id]);
    expect((await producer.client.listRuns({ workflow: 'dw.sleeper', state: 'delayed' })).runs).toEqual([]);
    // The cap of 1 is free while it sleeps: a short run goes through meanwhile.
    const short = await producer.client.run('dw.sleeper', { ms: 0 });
    expect(short).toBe(1);
    expect(await long.result({ timeoutMs: 10_000 })).toBe(2);
    expect(effects.get(`before:${long.id}`)).toBe(1);
    expect(effects.get(`after:${long.id}`)).toBe(1);
  });

  it('signals: during the wait, before it (mailbox), after a timeout, to a finished or unknown run', async () => {
    const during = await producer.client.enqueue('dw.approval', {});
    await pollUntil(
      () => producer.client.get(during.id),
      (run) => run?.state === 'waiting-signal',
      'waiting for the signal',
    );
    expect(await producer.client.signal(during.id, 'approve', { ok: true })).toEqual({ delivered: true });
    expect(await during.result({ timeoutMs: 10_000 })).toEqual({ timedOut: false, payload: { ok: true } });

    const early = await producer.client.enqueue('dw.approval', {}, { delayMs: 300 });
    expect(await producer.client.signal(early.id, 'other', 1)).toEqual({ delivered: false });
    expect(await producer.client.signal(early.id, 'approve', { ok: false })).toEqual({ delivered: false });
    expect(await early.result({ timeoutMs: 10_000 })).toEqual({ timedOut: false, payload: { ok: false } });

    const late = await producer.client.enqueue('dw.approval', { timeoutMs: 200 });
    expect(await late.result({ timeoutMs: 10_000 })).toEqual({ timedOut: true });
    await expect(producer.client.signal(late.id, 'approve', 1)).rejects.toBeInstanceOf(RunStateError);
    await expect(producer.client.signal('dw-nobody', 'approve', 1)).rejects.toBeInstanceOf(RunNotFoundError);
    expect(effects.get(`asked:${during.id}`)).toBe(1);
  });

  it('events resume every run waiting on the key and none on another key', async () => {
    const a = await Promise.all([1, 2, 3].map(() => producer.client.enqueue('dw.payment', { order: 'o-1' })));
    const b = await producer.client.enqueue('dw.payment', { order: 'o-2' });
    await pollUntil(
      () => producer.client.stats(),
      (s) => s.workflows['dw.payment']?.waitingEvent === 4,
      'four runs wait',
    );
    expect(await producer.client.sendEvent('payment.settled', { key: 'o-1', payload: { amount: 5 } })).toBe(3);
    expect(await Promise.all(a.map((h) => h.result({ timeoutMs: 10_000 })))).toEqual([5, 5, 5]);
    expect((await producer.client.get(b.id))?.state).toBe('waiting-event');
    expect(await producer.client.sendEvent('payment.settled', { key: 'o-3' })).toBe(0);
    expect(await producer.client.sendEvent('payment.settled', { key: 'o-2', payload: { amount: 7 } })).toBe(1);
    expect(await b.result({ timeoutMs: 10_000 })).toBe(7);
  });

  it('steps started side by side may reach the recorder in another order on the replay: not a NonDeterminismError', async () => {
    const run = await producer.client.enqueue('dw.parallel', {});
    expect(await run.result({ timeoutMs: 10_000 })).toBe(1);
    // a was recorded first (b was slow); the replay after the sleep called b first.
    const fields = await redis.hgetall(`{sluice:${ns}}:run:${run.id}`);
    expect([fields['step:@0'], fields['step:@1']]).toEqual(['step:a#1', 'step:b#1']);
    expect(callOrder).toEqual(['1:a', '1:b', '2:b', '2:a']);
    expect([effects.get(`a:${run.id}`), effects.get(`b:${run.id}`), effects.get(`last:${run.id}`)]).toEqual([1, 1, 1]);
  });

  it('child workflows: results, a failure the parent catches, each child run once', async () => {
    const ok = await producer.client.enqueue('dw.parent', {});
    expect(await ok.result({ timeoutMs: 10_000 })).toEqual({ one: 2, all: [4, 6] });
    const bad = await producer.client.enqueue('dw.parent', { fail: true });
    expect(await bad.result({ timeoutMs: 10_000 })).toEqual({ one: 2, all: ['failed', 'child 3 broke'] });
    for (const parent of [ok.id, bad.id]) {
      expect(effects.get(`child:${parent}/invoke:dw.child#1`)).toBe(1);
      expect(effects.get(`child:${parent}/invoke:dw.child#3`)).toBe(1);
    }
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });
});
