import type Redis from 'ioredis';
import { RunContext, RunInfo, RunPage, Workflow } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Gates, pollUntil } from '../support/workflows';

/**
 * What operators see of runs in durable waits: `get().state` / `waitingFor` (with `until`), the
 * per-kind counts of `stats()` (and `delayed` without them), and `listRuns` of each wait state,
 * paged, with 'delayed' leaving the waiting runs out.
 */
const holds = new Gates();
const HOUR = 3_600_000;

type WaitInput =
  | { kind: 'sleep'; ms: number }
  | { kind: 'until'; at: string }
  | { kind: 'signal'; timeoutMs?: number }
  | { kind: 'event'; key?: string; timeoutMs?: number }
  | { kind: 'child' };

@Workflow('wv.waits', { attempts: 1 })
class Waits {
  async run(input: WaitInput, ctx: RunContext) {
    switch (input.kind) {
      case 'sleep':
        return ctx.sleep('nap', input.ms);
      case 'until':
        return ctx.sleepUntil('until', new Date(input.at));
      case 'signal':
        return ctx.waitForSignal('approve', input.timeoutMs === undefined ? undefined : { timeoutMs: input.timeoutMs });
      case 'event':
        return ctx.waitForEvent('paid', { ...(input.key && { key: input.key }), ...(input.timeoutMs && { timeoutMs: input.timeoutMs }) });
      case 'child':
        return ctx.invoke('wv.child', { ms: HOUR });
    }
  }
}

@Workflow('wv.child', { attempts: 1 })
class Child {
  async run(input: { ms: number }, ctx: RunContext) {
    await ctx.sleep('child-nap', input.ms);
  }
}

/** Capped at 1: a run whose sleep ends while another holds the slot is due but not claimed. */
@Workflow('wv.capped', { attempts: 1, concurrency: 1 })
class Capped {
  async run(input: { sleepMs?: number; hold?: string }, ctx: RunContext) {
    if (input.sleepMs) await ctx.sleep('nap', input.sleepMs);
    if (input.hold) await holds.get(input.hold).promise;
    return 'done';
  }
}

describe('durable waits: visibility', () => {
  const ns = uniqueNamespace('wvi');
  const base = `{sluice:${ns}}:`;
  let redis: Redis;
  let worker: TestApp;
  let producer: TestApp;
  const ids: Record<string, string> = {};
  let t0 = 0;
  const until3h = new Date(Date.now() + 3 * HOUR);

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Waits, Child, Capped], { namespace: ns, worker: { concurrency: 8 } });
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
    t0 = Date.now();
    const population: Record<string, WaitInput> = {
      s1: { kind: 'sleep', ms: HOUR },
      s2: { kind: 'sleep', ms: 2 * HOUR },
      s3: { kind: 'until', at: until3h.toISOString() },
      g1: { kind: 'signal' },
      g2: { kind: 'signal', timeoutMs: HOUR },
      g3: { kind: 'signal' },
      e1: { kind: 'event', key: 'o1', timeoutMs: HOUR },
      e2: { kind: 'event' },
      c1: { kind: 'child' },
    };
    for (const [label, input] of Object.entries(population))
      ids[label] = (await producer.client.enqueue('wv.waits', input, { id: `${ns}-${label}` })).id;
    ids.d1 = (await producer.client.enqueue('wv.waits', { kind: 'signal' }, { id: `${ns}-d1`, delayMs: HOUR })).id;
    ids.d2 = (await producer.client.enqueue('wv.waits', { kind: 'signal' }, { id: `${ns}-d2`, delayMs: 2 * HOUR })).id;
    await pollUntil(
      () => producer.client.stats({ workflow: 'wv.waits' }),
      (s) => s.workflows['wv.waits'].active + s.workflows['wv.waits'].waiting === 0,
      'every run in its wait',
    );
    await pollUntil(
      () => producer.client.get(`${ids.c1}/invoke:wv.child#1`),
      (r) => r?.state === 'sleeping',
      'the child sleeps',
    );
  });
  afterAll(async () => {
    holds.openAll();
    await worker.close();
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const get = (label: string) => producer.client.get(ids[label]) as Promise<RunInfo>;
  const near = (date: Date | undefined, ms: number) => {
    expect(date).toBeInstanceOf(Date);
    expect(date!.getTime()).toBeGreaterThanOrEqual(t0 + ms - 1000);
    expect(date!.getTime()).toBeLessThanOrEqual(Date.now() + ms + 1000);
  };

  it('get(): the state and waitingFor of each kind of wait, with until for deadlines', async () => {
    const s1 = await get('s1');
    expect(s1).toMatchObject({ state: 'sleeping', waitingFor: { kind: 'sleep', step: 'nap', until: expect.any(Date) }, attempts: 1 });
    near(s1.waitingFor && 'until' in s1.waitingFor ? s1.waitingFor.until : undefined, HOUR);
    // A sleeping run is due at its deadline.
    expect(s1.dueAt.getTime()).toBe((s1.waitingFor as { until: Date }).until.getTime());
    expect((await get('s3')).waitingFor).toEqual({ kind: 'sleep', step: 'until', until: until3h });

    expect((await get('g1')).waitingFor).toEqual({ kind: 'signal', step: 'signal:approve', name: 'approve' });
    const g2 = await get('g2');
    expect(g2).toMatchObject({
      state: 'waiting-signal',
      waitingFor: { kind: 'signal', step: 'signal:approve', name: 'approve', until: expect.any(Date) },
    });
    near((g2.waitingFor as { until: Date }).until, HOUR);

    const e1 = await get('e1');
    expect(e1).toMatchObject({
      state: 'waiting-event',
      waitingFor: { kind: 'event', step: 'event:paid', name: 'paid', key: 'o1', until: expect.any(Date) },
    });
    near((e1.waitingFor as { until: Date }).until, HOUR);
    expect(await get('e2')).toMatchObject({
      state: 'waiting-event',
      waitingFor: { kind: 'event', step: 'event:paid', name: 'paid', key: '' },
    });
    expect((await get('e2')).waitingFor).not.toHaveProperty('until');

    expect(await get('c1')).toMatchObject({
      state: 'waiting-child',
      waitingFor: { kind: 'child', step: 'invoke:wv.child', runIds: [`${ids.c1}/invoke:wv.child#1`] },
    });
    // A plain delayed run has no waitingFor.
    const d1 = await get('d1');
    expect(d1.state).toBe('delayed');
    expect(d1).not.toHaveProperty('waitingFor');
  });

  it('stats(): a count per kind; delayed leaves out the runs in a wait (timed waits are in the delayed set too)', async () => {
    const { workflows } = await producer.client.stats();
    expect(workflows['wv.waits']).toEqual(
      expect.objectContaining({ sleeping: 3, waitingSignal: 3, waitingEvent: 2, waitingChild: 1, delayed: 2, waiting: 0, active: 0 }),
    );
    expect(workflows['wv.child']).toEqual(
      expect.objectContaining({ sleeping: 1, waitingSignal: 0, waitingEvent: 0, waitingChild: 0, delayed: 0, active: 0 }),
    );
    // s1, s2, s3, g2, e1 (deadlines) and d1, d2.
    expect(await redis.zcard(`${base}wf:wv.waits:delayed`)).toBe(7);
  });

  async function all(state: RunPage['runs'][number]['state'], limit: number, order: 'asc' | 'desc' = 'asc') {
    const pages: string[][] = [];
    let cursor: string | null | undefined;
    do {
      const page = await producer.client.listRuns({ workflow: 'wv.waits', state, limit, order, ...(cursor && { cursor }) });
      for (const run of page.runs) expect({ id: run.id, state: run.state }).toEqual({ id: run.id, state });
      pages.push(page.runs.map((r) => r.id));
      cursor = page.cursor;
    } while (cursor && pages.length < 20);
    return pages;
  }
  const flat = (pages: string[][]) => pages.flat();
  const label = (list: string[]) => list.map((id) => id.slice(ns.length + 1));

  it('listRuns of each wait state, paged by deadline (no deadline last), asc and desc', async () => {
    expect((await all('sleeping', 2)).map(label)).toEqual([['s1', 's2'], ['s3']]);
    expect((await all('sleeping', 2, 'desc')).map(label)).toEqual([['s3', 's2'], ['s1']]);
    const signals = label(flat(await all('waiting-signal', 2)));
    expect(signals[0]).toBe('g2');
    expect([...signals].sort()).toEqual(['g1', 'g2', 'g3']);
    expect(label(flat(await all('waiting-event', 1)))).toEqual(['e1', 'e2']);
    expect(label(flat(await all('waiting-child', 10)))).toEqual(['c1']);
    const page = await producer.client.listRuns({ workflow: 'wv.waits', state: 'sleeping', limit: 10 });
    expect(page.runs.every((r) => r.waitingFor?.kind === 'sleep')).toBe(true);
  });

  it("listRuns 'delayed' leaves out the runs in a wait, even one entry per page", async () => {
    expect(label(flat(await all('delayed', 1)))).toEqual(['d1', 'd2']);
    expect(label(flat(await all('delayed', 10, 'desc')))).toEqual(['d2', 'd1']);
    expect(flat(await all('waiting', 10))).toEqual([]);
  });

  it('a timed wait that came due but has no slot yet shows as waiting, not in its wait (stats, listRuns)', async () => {
    const sleeper = await producer.client.enqueue('wv.capped', { sleepMs: 300 });
    await pollUntil(
      () => producer.client.get(sleeper.id),
      (r) => r?.state === 'sleeping',
      'the run sleeps',
    );
    const holder = await producer.client.enqueue('wv.capped', { hold: 'cap' });
    await pollUntil(
      () => producer.client.get(holder.id),
      (r) => r?.state === 'active',
      'the holder runs',
    );
    // The sleep ends while the cap of 1 is taken: the run is due (promoted), not claimed.
    const due = await pollUntil(
      () => producer.client.get(sleeper.id),
      (r) => r?.state !== 'sleeping',
      'the sleep ended',
      5_000,
    );
    // Observed while the slot is taken, asserted once the runs are through (so a failure leaves nothing running).
    const stats = (await producer.client.stats({ workflow: 'wv.capped' })).workflows['wv.capped'];
    const listedSleeping = (await producer.client.listRuns({ workflow: 'wv.capped', state: 'sleeping' })).runs.map((r) => r.id);
    const listedWaiting = (await producer.client.listRuns({ workflow: 'wv.capped', state: 'waiting' })).runs.map((r) => r.id);
    holds.open('cap');
    expect(await sleeper.result({ timeoutMs: 10_000 })).toBe('done');
    expect(await holder.result({ timeoutMs: 10_000 })).toBe('done');

    expect(due?.state).toBe('waiting');
    expect(due).not.toHaveProperty('waitingFor');
    expect(listedSleeping).toEqual([]);
    expect(listedWaiting).toEqual([sleeper.id]);
    // Regression: reserve.lua promoted the due run from wf:<name>:delayed to its lane but left it
    // in wf:<name>:sleeping until a claim (endWaitByTime): stats counted it as sleeping as well as
    // waiting ({ sleeping: 1, delayed: -1 }: ZCARD delayed - timed waits went negative).
    expect({ waiting: stats.waiting, active: stats.active, sleeping: stats.sleeping, delayed: stats.delayed }).toEqual({
      waiting: 1,
      active: 1,
      sleeping: 0,
      delayed: 0,
    });
    const after = (await producer.client.stats({ workflow: 'wv.capped' })).workflows['wv.capped'];
    expect({ sleeping: after.sleeping, delayed: after.delayed }).toEqual({ sleeping: 0, delayed: 0 });
  });

  it('cancel reports the wait state, cascades to the child; afterwards every count and index is empty', async () => {
    const expected: Record<string, [string, number]> = {
      s1: ['sleeping', 0],
      s2: ['sleeping', 0],
      s3: ['sleeping', 0],
      g1: ['waiting-signal', 0],
      g2: ['waiting-signal', 0],
      g3: ['waiting-signal', 0],
      e1: ['waiting-event', 0],
      e2: ['waiting-event', 0],
      c1: ['waiting-child', 1],
      d1: ['delayed', 0],
      d2: ['delayed', 0],
    };
    for (const [key, [state, children]] of Object.entries(expected)) {
      expect({ key, result: await producer.client.cancel(ids[key]) }).toEqual({ key, result: { cancelled: true, state, children } });
    }
    const { workflows } = await producer.client.stats();
    for (const wf of ['wv.waits', 'wv.child']) {
      expect(workflows[wf]).toEqual(
        expect.objectContaining({ sleeping: 0, waitingSignal: 0, waitingEvent: 0, waitingChild: 0, delayed: 0, waiting: 0, active: 0 }),
      );
    }
    for (const suffix of ['sleeping', 'waiting-signal', 'waiting-event', 'waiting-child', 'delayed']) {
      expect({ suffix, n: await redis.zcard(`${base}wf:wv.waits:${suffix}`) }).toEqual({ suffix, n: 0 });
    }
    expect(await redis.exists(`${base}event:paid|o1`, `${base}event:paid|`)).toBe(0);
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });
});
