import type Redis from 'ioredis';
import { setTimeout as delay } from 'node:timers/promises';
import { Workflow } from '../../lib';
import { dropNamespace, rawRedis, uniqueNamespace } from '../support/app';
import { cardinalities, completions, fakeParked, FlowApp, flowKeys, LiveGauge, sample, startFlowApp, within } from '../support/flow';
import { deferred } from '../support/workflows';

/**
 * Groups (e.g. tenants): a cap per group (a default plus overrides) that holds while other
 * groups proceed, fair round-robin reservation across groups, priority-then-FIFO order within
 * one, no cost for idle groups, and the enqueue fast path under group and namespace caps.
 */
const live = new LiveGauge();

@Workflow('grp.capped', { groupConcurrency: 2 })
class Capped {
  async run(input: { g: string }) {
    live.enter(input.g);
    try {
      await delay(2); // the work itself
    } finally {
      live.leave(input.g);
    }
  }
}

const starts: string[] = [];
let startedB = 0;
const warm = deferred();
const allB = deferred();
@Workflow('fair.w')
class Fair {
  run(input: { g: string }) {
    starts.push(input.g);
    if (starts.length === 100) warm.resolve();
    if (input.g === 'B' && ++startedB === 5) allB.resolve();
  }
}

const order: string[] = [];
@Workflow('fair.prio')
class Prio {
  run(input: { key: string }) {
    order.push(input.key);
    return input.key;
  }
}

@Workflow('fpg.w', { groupConcurrency: 1 })
class FastW {
  run(input: { key: string }) {
    return input.key;
  }
}

let redis: Redis;
let apps: FlowApp[] = [];
const namespaces: string[] = [];

function space() {
  const ns = uniqueNamespace('grp');
  namespaces.push(ns);
  return { ns, k: flowKeys(ns) };
}
async function start(...args: Parameters<typeof startFlowApp>): Promise<FlowApp> {
  const app = await startFlowApp(...args);
  apps.push(app);
  return app;
}
const maxOf = (samples: number[][], i: number) => Math.max(...samples.map((s) => s[i]));

beforeAll(() => void (redis = rawRedis()));
afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
  apps = [];
  for (const ns of namespaces) await dropNamespace(redis, ns);
  await redis.quit();
});

describe('group caps', () => {
  const { ns, k } = space();
  const WF = 'grp.capped';
  let app: FlowApp;
  beforeAll(async () => void (app = await start([Capped], { namespace: ns, worker: { concurrency: 12 } })));

  /** Enqueues `runs` runs per group and samples every group's active count until all complete. */
  async function drain(backlogs: Record<string, number>): Promise<number[][]> {
    const groups = Object.keys(backlogs);
    const sampler = sample(() =>
      cardinalities(
        redis,
        groups.map((g) => k.groupActive(WF, g)),
      ),
    );
    const drained = completions(
      [app],
      Object.values(backlogs).reduce((x, y) => x + y, 0),
    );
    for (const g of groups)
      await app.client.enqueueMany(
        Capped,
        Array.from({ length: backlogs[g] }, () => ({ input: { g }, opts: { group: g } })),
      );
    await within(drained, 20_000, `the backlogs of ${groups.join(', ')} to drain`);
    const samples = await sampler.stop();
    expect(samples.length).toBeGreaterThan(10);
    return samples;
  }

  it('holds per group while the other groups proceed', async () => {
    const samples = await drain({ g1: 40, g2: 40, g3: 40 });
    ['g1', 'g2', 'g3'].forEach((g, i) => {
      expect({ g, sampled: maxOf(samples, i), live: live.max(g) }).toEqual({ g, sampled: 2, live: 2 });
    });
    // Groups ran side by side: one group at its cap did not hold the others back.
    expect(samples.some((s) => s.filter((n) => n > 0).length >= 2)).toBe(true);
    expect(samples.some((s) => s.every((n) => n === 2))).toBe(true);
  });

  it('a per-group override holds for that group while the others keep the default', async () => {
    expect(await app.client.setLimits({ workflow: WF, group: 'vip', limit: 5 })).toBeNull();
    expect(await app.client.getLimits({ workflow: WF, group: 'vip' })).toEqual({
      namespace: null,
      workflow: null,
      groupDefault: 2,
      groupOverride: 5,
      group: 5,
      rateLimit: null,
      groupRateLimit: null,
      groupRateOverride: null,
      groupRate: null,
    });
    expect(await app.client.getLimits({ workflow: WF, group: 'o1' })).toEqual({
      namespace: null,
      workflow: null,
      groupDefault: 2,
      groupOverride: null,
      group: 2,
      rateLimit: null,
      groupRateLimit: null,
      groupRateOverride: null,
      groupRate: null,
    });
    const samples = await drain({ vip: 60, o1: 30, o2: 30 });
    expect(maxOf(samples, 0)).toBeGreaterThan(2);
    expect(maxOf(samples, 0)).toBeLessThanOrEqual(5);
    expect(live.max('vip')).toBeLessThanOrEqual(5);
    expect([maxOf(samples, 1), maxOf(samples, 2), live.max('o1'), live.max('o2')]).toEqual([2, 2, 2, 2]);
  });

  it("group '*' changes the default of every group, and overrides stay", async () => {
    expect(await app.client.setLimits({ workflow: WF, group: '*', limit: 3 })).toBe(2);
    expect(await app.client.getLimits({ workflow: WF, group: 'd1' })).toMatchObject({ groupDefault: 3, groupOverride: null, group: 3 });
    expect(await app.client.getLimits({ workflow: WF, group: 'vip' })).toMatchObject({ groupDefault: 3, group: 5 });
    const samples = await drain({ d1: 40, d2: 40 });
    expect([maxOf(samples, 0), maxOf(samples, 1), live.max('d1'), live.max('d2')]).toEqual([3, 3, 3, 3]);
  });
});

describe('fairness across groups', () => {
  it("a group enqueued behind another group's 5,000 waiting runs starts within the next two batches", async () => {
    const { ns, k } = space();
    const C = 10; // worker concurrency: no claim (reserve or refill) takes more than C runs
    const producer = await start([Fair], { namespace: ns, worker: { enabled: false } });
    for (let chunk = 0; chunk < 5; chunk++) {
      await producer.client.enqueueMany(
        Fair,
        Array.from({ length: 1_000 }, () => ({ input: { g: 'A' }, opts: { group: 'A' } })),
      );
    }
    expect((await producer.client.stats({ workflow: Fair, groups: true })).workflows['fair.w'].groups).toEqual({
      A: { waiting: 5_000, active: 0, limit: null, paused: false, rateLimit: null },
    });
    const worker = await start([Fair], { namespace: ns, worker: { concurrency: C } });
    const drained = completions([worker], 5_005);
    await warm.promise;
    // Counted from before the enqueue call: an upper bound on the A runs that started after B's were in Redis.
    const mark = starts.length;
    await producer.client.enqueueMany(
      Fair,
      Array.from({ length: 5 }, () => ({ input: { g: 'B' }, opts: { group: 'B' } })),
    );
    await within(allB.promise, 10_000, "B's runs to start");
    const lastB = starts.lastIndexOf('B');
    const aBetween = starts.slice(mark, lastB).filter((g) => g === 'A').length;
    expect(aBetween).toBeLessThanOrEqual(2 * C);
    expect(starts.slice(0, lastB).filter((g) => g === 'A').length).toBeLessThan(1_000); // A's backlog was still there

    await within(drained, 30_000, 'the backlog to drain');
    expect(starts.length).toBe(5_005);
    // Idle groups cost nothing: out of the round-robin and of the group index, and not listed.
    expect(await redis.zrange(k.ready('fair.w'), 0, -1)).toEqual([]);
    expect(await redis.smembers(k.groups('fair.w'))).toEqual([]);
    const stats = await producer.client.stats({ workflow: Fair, groups: true });
    expect(stats.workflows['fair.w']).toMatchObject({ waiting: 0, active: 0, completed: 5_005, groups: {} });
  });

  it('runs of one group start by priority, then FIFO', async () => {
    const { ns } = space();
    const producer = await start([Prio], { namespace: ns, worker: { enabled: false } });
    const runs: Array<[string, string, number]> = [
      ['p0', 'p', 0],
      ['q0', 'q', 0],
      ['p1', 'p', 5],
      ['p2', 'p', 0],
      ['q1', 'q', 3],
      ['p3', 'p', 9],
      ['p4', 'p', 5],
      ['p5', 'p', 0],
      ['p6', 'p', 9],
    ];
    const handles = await producer.client.enqueueMany(
      Prio,
      runs.map(([key, group, priority]) => ({ input: { key }, opts: { group, priority } })),
    );
    await start([Prio], { namespace: ns, worker: { concurrency: 1 } });
    expect(await Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })))).toEqual(runs.map(([key]) => key));
    expect(order.filter((key) => key.startsWith('p'))).toEqual(['p3', 'p6', 'p1', 'p4', 'p0', 'p2', 'p5']);
    expect(order.filter((key) => key.startsWith('q'))).toEqual(['q1', 'q0']);
  });
});

describe('enqueue fast path under group and namespace caps', () => {
  const WF = 'fpg.w';

  it('is not taken when the group cap is full, is taken for a group with room, and strands nothing', async () => {
    const { ns, k } = space();
    // The producer's lockMs is the first lease of a run it fast-paths.
    const producer = await start([FastW], { namespace: ns, worker: { enabled: false, lockMs: 300 } });
    await producer.client.setLimits({ workflow: WF, group: '*', limit: 1 }); // producers write no caps; a worker would write this one
    await fakeParked(redis, k.parked(WF));
    const r1 = await producer.client.enqueue(FastW, { key: 'r1' }, { group: 'g' });
    expect(await producer.client.get(r1.id)).toMatchObject({ state: 'active', attempts: 1 });
    expect(await redis.smembers(k.groupActive(WF, 'g'))).toEqual([r1.id]);
    expect(await redis.zscore(k.parked(WF), 'fake')).toBeNull();

    await redis.del(k.wake(WF)); // as if the parked worker had taken the handoff
    await fakeParked(redis, k.parked(WF));
    const r2 = await producer.client.enqueue(FastW, { key: 'r2' }, { group: 'g' });
    expect(await producer.client.get(r2.id)).toMatchObject({ state: 'waiting', attempts: 0 });
    expect(await redis.zscore(k.parked(WF), 'fake')).not.toBeNull(); // the taker was left alone
    expect(await redis.smembers(k.groupActive(WF, 'g'))).toEqual([r1.id]);
    expect(await redis.zscore(k.ready(WF), 'g')).toBeNull(); // full: out of the round-robin
    expect(await redis.sismember(k.groups(WF), 'g')).toBe(1);

    await redis.del(k.wake(WF)); // as if a worker had taken the wake marker
    const r3 = await producer.client.enqueue(FastW, { key: 'r3' }, { group: 'h' });
    expect(await producer.client.get(r3.id)).toMatchObject({ state: 'active', attempts: 1 });
    expect(await redis.smembers(k.groupActive(WF, 'h'))).toEqual([r3.id]);

    // r3's handoff is taken by the worker's first claim; r1's is gone, so its lease runs out and
    // the stalled scan recovers it; r2 starts once r1 frees the group's slot.
    const worker = await start([FastW], { namespace: ns, worker: { stalledIntervalMs: 100 } });
    expect(await Promise.all([r1, r2, r3].map((h) => worker.client.wait(h.id, { timeoutMs: 10_000 })))).toEqual(['r1', 'r2', 'r3']);
    expect(await producer.client.get(r1.id)).toMatchObject({ state: 'completed', attempts: 2 });
    expect(await producer.client.get(r3.id)).toMatchObject({ state: 'completed', attempts: 1 });
    expect(await cardinalities(redis, [k.groupActive(WF, 'g'), k.groupActive(WF, 'h'), k.active(WF)])).toEqual([0, 0, 0]);
    expect(await redis.zcard(k.keys.leases)).toBe(0);
  });

  it('is not taken when the namespace cap is full', async () => {
    const { ns, k } = space();
    const producer = await start([FastW], { namespace: ns, worker: { enabled: false } });
    expect(await producer.client.setLimits({ limit: 1 })).toBeNull();
    await fakeParked(redis, k.parked(WF));
    const n1 = await producer.client.enqueue(FastW, { key: 'n1' });
    expect((await producer.client.get(n1.id))?.state).toBe('active');
    expect(await redis.zcard(k.keys.leases)).toBe(1);

    await redis.del(k.wake(WF)); // as if the parked worker had taken the handoff
    await fakeParked(redis, k.parked(WF));
    // A fresh group with room, nothing queued, a parked taker: only the namespace cap is full.
    const n2 = await producer.client.enqueue(FastW, { key: 'n2' }, { group: 'x' });
    expect(await producer.client.get(n2.id)).toMatchObject({ state: 'waiting', attempts: 0 });
    expect(await redis.zscore(k.parked(WF), 'fake')).not.toBeNull();
    expect(await redis.zscore(k.ready(WF), 'x')).not.toBeNull(); // the group itself has room
    expect(await redis.zcard(k.keys.leases)).toBe(1);
    expect(await redis.scard(k.groupActive(WF, 'x'))).toBe(0);
  });
});
