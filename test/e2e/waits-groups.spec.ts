import type Redis from 'ioredis';
import { RunContext, Workflow } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Gates, pollUntil } from '../support/workflows';

/**
 * Durable waits of grouped, prioritised and paused runs: a wait frees its group's slot, a run
 * resumed (by time or by a signal) while its group is full or its workflow paused waits in its
 * group's lane like any due run, children take the group and priority they are invoked with, and
 * the indexes stay consistent throughout (audited while runs wait, not only at the end).
 */
const holds = new Gates();

@Workflow('wg.tenant', { attempts: 1, groupConcurrency: 1 })
class Tenant {
  async run(input: { sleepMs?: number; signal?: boolean; hold?: string }, ctx: RunContext) {
    if (input.sleepMs) await ctx.sleep('nap', input.sleepMs);
    let got: unknown = null;
    if (input.signal) {
      const outcome = await ctx.waitForSignal('go');
      got = outcome.timedOut ? 'timeout' : outcome.payload;
    }
    if (input.hold) await holds.get(input.hold).promise;
    return { got, attempt: ctx.attempt };
  }
}

@Workflow('wg.parent', { attempts: 1 })
class Parent {
  async run(input: { group: string; priority: number }, ctx: RunContext) {
    return ctx.invoke(Tenant, { hold: `child-${ctx.runId}` }, { group: input.group, priority: input.priority, id: `${ctx.runId}-kid` });
  }
}

describe('durable waits: groups, priorities, pause', () => {
  const ns = uniqueNamespace('wgr');
  let redis: Redis;
  let worker: TestApp;
  let producer: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Tenant, Parent], { namespace: ns, worker: { concurrency: 8 } });
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
  });
  afterAll(async () => {
    holds.openAll();
    await worker.close();
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const stateOf = async (id: string) => (await producer.client.get(id))?.state;
  const inState = (id: string, state: string, timeoutMs?: number) =>
    pollUntil(
      () => stateOf(id),
      (s) => s === state,
      `${id} ${state}`,
      timeoutMs,
    );
  const audit = async () => expectConsistent(await auditNamespace(redis, { namespace: ns }));
  const groupStats = async (group: string) =>
    (await producer.client.stats({ workflow: 'wg.tenant', groups: true })).workflows['wg.tenant'].groups?.[group];

  it('a sleeping run frees its group slot; when its sleep ends with the group full it waits in the group lane', async () => {
    const sleeper = await producer.client.enqueue('wg.tenant', { sleepMs: 300 }, { group: 'g1' });
    await inState(sleeper.id, 'sleeping');
    // The group's one slot is free: another run of the group starts.
    const holder = await producer.client.enqueue('wg.tenant', { hold: 'g1' }, { group: 'g1' });
    await inState(holder.id, 'active');
    await audit();
    await inState(sleeper.id, 'waiting', 5_000);
    expect(await groupStats('g1')).toEqual(expect.objectContaining({ waiting: 1, active: 1 }));
    const stats = (await producer.client.stats({ workflow: 'wg.tenant' })).workflows['wg.tenant'];
    expect({ sleeping: stats.sleeping, delayed: stats.delayed, waiting: stats.waiting }).toEqual({ sleeping: 0, delayed: 0, waiting: 1 });
    await audit();
    holds.open('g1');
    expect(await holder.result({ timeoutMs: 10_000 })).toEqual({ got: null, attempt: 1 });
    expect(await sleeper.result({ timeoutMs: 10_000 })).toEqual({ got: null, attempt: 2 });
    await audit();
  });

  it('a grouped run resumed by a signal while its group is full waits its turn in the lane, then runs', async () => {
    const waiter = await producer.client.enqueue('wg.tenant', { signal: true }, { group: 'g2', priority: 3 });
    await inState(waiter.id, 'waiting-signal');
    const holder = await producer.client.enqueue('wg.tenant', { hold: 'g2' }, { group: 'g2' });
    await inState(holder.id, 'active');
    expect((await producer.client.listRuns({ workflow: 'wg.tenant', state: 'waiting-signal', group: 'g2' })).runs.map((r) => r.id)).toEqual(
      [waiter.id],
    );
    expect((await producer.client.listRuns({ workflow: 'wg.tenant', state: 'waiting-signal', group: 'g1' })).runs).toEqual([]);
    expect(await producer.client.signal(waiter.id, 'go', 'hello')).toEqual({ delivered: true });
    const due = await producer.client.get(waiter.id);
    expect(due).toMatchObject({ state: 'waiting', group: 'g2', priority: 3 });
    expect(await groupStats('g2')).toEqual(expect.objectContaining({ waiting: 1, active: 1 }));
    await audit();
    holds.open('g2');
    expect(await waiter.result({ timeoutMs: 10_000 })).toEqual({ got: 'hello', attempt: 2 });
    await audit();
  });

  it('a run whose wait ends while its workflow is paused stays due until it is resumed', async () => {
    const sleeper = await producer.client.enqueue('wg.tenant', { sleepMs: 200 }, { group: 'g3' });
    const waiter = await producer.client.enqueue('wg.tenant', { signal: true }, { group: 'g4' });
    await inState(sleeper.id, 'sleeping');
    await inState(waiter.id, 'waiting-signal');
    expect(await producer.client.pause({ workflow: 'wg.tenant' })).toBe(true);
    try {
      expect(await producer.client.signal(waiter.id, 'go', 'while paused')).toEqual({ delivered: true });
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(await stateOf(waiter.id)).toBe('waiting');
      expect(['waiting', 'sleeping']).toContain(await stateOf(sleeper.id));
      await audit();
    } finally {
      await producer.client.resume({ workflow: 'wg.tenant' });
    }
    expect(await waiter.result({ timeoutMs: 10_000 })).toEqual({ got: 'while paused', attempt: 2 });
    expect(await sleeper.result({ timeoutMs: 10_000 })).toEqual({ got: null, attempt: 2 });
  });

  it('a child takes the group and priority it is invoked with', async () => {
    const parent = await producer.client.enqueue('wg.parent', { group: 'kids', priority: 7 });
    const kid = `${parent.id}-kid`;
    await inState(kid, 'active');
    expect(await producer.client.get(kid)).toMatchObject({ group: 'kids', priority: 7, workflow: 'wg.tenant' });
    await inState(parent.id, 'waiting-child');
    await audit();
    holds.open(`child-${parent.id}`);
    expect(await parent.result({ timeoutMs: 10_000 })).toEqual({ got: null, attempt: 1 });
  });

  it('a cancelled grouped waiter leaves every index; the namespace is consistent at rest', async () => {
    const waiter = await producer.client.enqueue('wg.tenant', { signal: true }, { group: 'g5' });
    await inState(waiter.id, 'waiting-signal');
    expect(await producer.client.cancel(waiter.id)).toEqual({ cancelled: true, state: 'waiting-signal', children: 0 });
    expect(await producer.client.listRuns({ workflow: 'wg.tenant', state: 'waiting-signal' })).toEqual({ runs: [], cursor: null });
    await pollUntil(
      () => producer.client.stats({ workflow: 'wg.tenant' }),
      (s) => s.workflows['wg.tenant'].active === 0,
      'no run active',
    );
    await audit();
  });
});
