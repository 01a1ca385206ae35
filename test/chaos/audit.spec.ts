import 'reflect-metadata';
import Redis from 'ioredis';
import { NonRetryableError, RunContext, Workflow, WorkflowFailedError } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { auditNamespace, AuditReport, expectConsistent } from '../support/audit';
import { Gates, pollUntil } from '../support/workflows';

jest.setTimeout(60_000);

/** The audit itself: silent on consistent namespaces built through the real API, loud on planted damage. */

const held = new Gates();
const entered = new Gates();

@Workflow('audit.work', { concurrency: 3, groupConcurrency: 1 })
class AuditWorkflow {
  async run(input: { gate?: string; fail?: boolean }, ctx: RunContext): Promise<{ ok: true }> {
    if (input.gate) {
      entered.open(input.gate);
      await held.get(input.gate).promise;
    }
    await ctx.step('one', () => 1);
    if (input.fail) throw new NonRetryableError('planned failure');
    return { ok: true };
  }
}

const childGates = new Gates();

@Workflow('audit.child')
class AuditChild {
  async run(input: { gate: string }): Promise<string> {
    await childGates.get(input.gate).promise;
    return input.gate;
  }
}

/** One durable wait of each kind, as its input says (the child one on a gated child). */
@Workflow('audit.waits')
class AuditWaits {
  async run(input: { kind: 'sleep' | 'signal' | 'event' | 'child'; ms?: number; gate?: string }, ctx: RunContext): Promise<unknown> {
    if (input.kind === 'sleep') return ctx.sleep('nap', input.ms ?? 3_600_000);
    if (input.kind === 'signal') return ctx.waitForSignal('go');
    if (input.kind === 'event') return ctx.waitForEvent('paid', { key: 'k1', timeoutMs: '1h' });
    return ctx.invokeAll([
      { workflow: AuditChild, input: { gate: `${input.gate}-a` } },
      { workflow: AuditChild, input: { gate: `${input.gate}-b` } },
    ]);
  }
}

/** Sleeps in a workflow the test pauses, so the sleep comes due and stays unclaimed. */
@Workflow('audit.nap')
class AuditNap {
  async run(input: { ms: number }, ctx: RunContext): Promise<void> {
    await ctx.sleep('nap', input.ms);
  }
}

const WF = 'audit.work';
let redis: Redis;
const apps: TestApp[] = [];
const namespaces: string[] = [];

beforeAll(() => {
  redis = rawRedis();
});
afterAll(async () => {
  held.openAll();
  childGates.openAll();
  await Promise.all(apps.map((app) => app.close()));
  for (const ns of namespaces) await dropNamespace(redis, ns);
  await redis.quit();
});

function space(label: string) {
  const ns = uniqueNamespace(label);
  namespaces.push(ns);
  return { ns, keys: new RedisKeys('sluice', ns) };
}

async function start(ns: string, worker: boolean): Promise<TestApp> {
  const app = await createApp(worker ? [AuditWorkflow] : [], { namespace: ns, worker: worker ? { concurrency: 4 } : { enabled: false } });
  apps.push(app);
  return app;
}

const rulesOf = (report: AuditReport) => report.violations.map((v) => `${v.rule}${v.id === undefined ? '' : ` ${v.id}`}`);

describe('auditNamespace', () => {
  it('passes a namespace mid-flight and drained, built through the real API', async () => {
    const { ns } = space('audit-clean');
    const app = await start(ns, true);
    const { client } = app;

    // Two runs held active (one grouped, holding its group's single slot), two queued behind the
    // group cap (one with a priority: the zset lane), one delayed, one completed, one failed.
    const heldGrouped = await client.enqueue(AuditWorkflow, { gate: 'grouped' }, { group: 'tenant-a' });
    const heldPlain = await client.enqueue(AuditWorkflow, { gate: 'plain' });
    await Promise.all([entered.get('grouped').promise, entered.get('plain').promise]);
    const queued = await client.enqueue(AuditWorkflow, {}, { group: 'tenant-a' });
    const queuedPriority = await client.enqueue(AuditWorkflow, {}, { group: 'tenant-a', priority: 5 });
    const delayed = await client.enqueue(AuditWorkflow, {}, { delayMs: '1h' });
    const done = await client.enqueue(AuditWorkflow, {});
    const failed = await client.enqueue(AuditWorkflow, { fail: true });
    await expect(done.result({ timeoutMs: 20_000 })).resolves.toEqual({ ok: true });
    await expect(failed.result({ timeoutMs: 20_000 })).rejects.toBeInstanceOf(WorkflowFailedError);
    const acknowledged = [heldGrouped, heldPlain, queued, queuedPriority, delayed, done, failed].map((h) => h.id);

    const midFlight = await auditNamespace(redis, { namespace: ns, acknowledged });
    expectConsistent(midFlight);
    expect(midFlight.states).toEqual({ waiting: 2, delayed: 1, active: 2, completed: 1, failed: 1, cancelled: 0 });
    expect(midFlight.leases).toBe(2);
    expect(midFlight.workflows[WF]).toMatchObject({
      active: 2,
      delayed: 1,
      due: 2,
      limit: 3,
      groupLimit: 1,
      groups: { 'tenant-a': { active: 1, due: 2, limit: 1 } },
      stats: { completed: 1, failed: 1 },
    });

    held.openAll();
    await Promise.all([heldGrouped, heldPlain, queued, queuedPriority].map((h) => h.result({ timeoutMs: 20_000 })));
    await app.close();
    apps.splice(apps.indexOf(app), 1);

    const drained = await auditNamespace(redis, { namespace: ns, acknowledged });
    expectConsistent(drained);
    expect(drained.states).toEqual({ waiting: 0, delayed: 1, active: 0, completed: 5, failed: 1, cancelled: 0 });
    expect(drained.leases).toBe(0);
    expect(drained.orphans).toEqual([]);
  });

  it('reports planted violations, each of them, and expectConsistent lists them all', async () => {
    const { ns, keys } = space('audit-planted');
    const { client } = await start(ns, false); // a producer: the runs stay where the enqueue put them
    const plain = await client.enqueue(AuditWorkflow, {});
    const grouped = await client.enqueue(AuditWorkflow, {}, { group: 'g1' });
    const groupedPriority = await client.enqueue(AuditWorkflow, {}, { group: 'g1', priority: 3 });
    const delayed = await client.enqueue(AuditWorkflow, {}, { delayMs: '1h' });
    const acknowledged = [plain, grouped, groupedPriority, delayed].map((h) => h.id);
    await client.schedule('s-moved', AuditWorkflow, { cron: '@yearly' });
    await client.schedule('s-paused', AuditWorkflow, { cron: '@yearly' });
    await client.pauseSchedule('s-paused');

    const before = await auditNamespace(redis, { namespace: ns, acknowledged });
    expectConsistent(before);
    expect(before.states).toMatchObject({ waiting: 3, delayed: 1 });

    // 1. A run in two lanes: its own, and another group's.
    await redis.rpush(keys.lane(WF, 'g2', 'queue'), plain.id);
    // 2. A lease of a run that is not active, and one of a run that does not exist.
    await redis.zadd(keys.leases, Date.now() + 60_000, delayed.id, Date.now() + 60_000, 'ghost');
    // 3. A consistent active run (every index written by hand) under a workflow cap of 0.
    await redis
      .multi()
      .lrem(keys.lane(WF, 'g1', 'queue'), 0, grouped.id)
      .hset(keys.run(grouped.id), 'state', 'active')
      .sadd(keys.workflow(WF, 'active'), grouped.id)
      .sadd(keys.lane(WF, 'g1', 'active'), grouped.id)
      .zadd(keys.leases, Date.now() + 60_000, grouped.id)
      .hset(keys.limits, `wf:${WF}`, 0)
      .exec();
    // 4. A waiting run in the group's active set as well.
    await redis.sadd(keys.lane(WF, 'g1', 'active'), groupedPriority.id);
    // 5. A completion counted that never happened.
    await redis.hincrby(keys.workflow(WF, 'stats'), 'completed', 1);
    // 6. An id a claim found no record for (lua/includes/claim.lua keeps them in `orphans`).
    await redis.lpush(`${keys.base}orphans`, `${WF} vanished`);
    // 7. Schedule index entries that disagree with the hashes: a wrong score, a paused schedule, no hash at all.
    await redis.zadd(keys.workflow(WF, 'next-fires'), 1, 's-moved', 2, 's-paused', 3, 's-ghost');

    const report = await auditNamespace(redis, { namespace: ns, acknowledged: [...acknowledged, 'never-enqueued'] });
    expect(report.ok).toBe(false);
    const rules = rulesOf(report);
    expect(rules).toEqual(
      expect.arrayContaining([
        `run-place ${plain.id}`, // two lanes
        `run-place ${delayed.id}`, // delayed, yet in leases
        `lease-without-active-run ${delayed.id}`,
        'lease-without-active-run ghost',
        'cap-exceeded',
        `run-place ${groupedPriority.id}`, // waiting, yet in an active set
        'active-count', // g1's active set holds a waiting run; leases ≠ active sets
        'group-index', // g2 has a due run and room but is not in the round-robin
        'acknowledged',
        'stats',
        'orphan-popped',
        'schedule-index s-moved',
        'schedule-index s-paused',
        'schedule-index s-ghost',
      ]),
    );
    // The hand-made active run is consistent: no violation names it.
    expect(report.violations.filter((v) => v.id === grouped.id)).toEqual([]);
    expect(report.violations.find((v) => v.rule === 'cap-exceeded')?.message).toBe(`workflow ${WF}: 1 active > cap 0`);
    expect(report.violations.find((v) => v.id === plain.id)?.message).toContain(
      `is in [wf:${WF}:g:g2:queue, wf:${WF}:queue], expected [wf:${WF}:queue]`,
    );

    let thrown: Error | undefined;
    try {
      expectConsistent(report);
    } catch (error) {
      thrown = error as Error;
    }
    expect(thrown).toBeDefined();
    expect(thrown!.message).toContain(`${report.violations.length} violation(s)`);
    for (const violation of report.violations) expect(thrown!.message).toContain(`[${violation.rule}] ${violation.message}`);
  });

  it('understands durable waits: silent on every kind of wait and a wait that came due, loud on planted damage', async () => {
    const { ns, keys } = space('audit-waits');
    const app = await createApp([AuditWaits, AuditChild, AuditNap], { namespace: ns, worker: { concurrency: 8 } });
    apps.push(app);
    const { client } = app;
    const W = 'audit.waits';
    const sleeper = await client.enqueue(AuditWaits, { kind: 'sleep' });
    const signalled = await client.enqueue(AuditWaits, { kind: 'signal' });
    const eventful = await client.enqueue(AuditWaits, { kind: 'event' });
    const parent = await client.enqueue(AuditWaits, { kind: 'child', gate: 'p' });
    // A signal the run is not waiting for yet: it goes to the mailbox.
    expect(await client.signal(sleeper.id, 'later', { n: 1 })).toEqual({ delivered: false });
    await pollUntil(
      () => client.stats(),
      (s) =>
        s.workflows[W]?.sleeping === 1 &&
        s.workflows[W]?.waitingSignal === 1 &&
        s.workflows[W]?.waitingEvent === 1 &&
        s.workflows[W]?.waitingChild === 1,
      'one run in each kind of wait',
    );
    // One child finishes, the other holds: the parent waits for one more.
    childGates.open('p-a');
    await pollUntil(
      () => redis.hget(keys.run(parent.id), 'waitLeft'),
      (left) => left === '1',
      'the parent waits for one child',
    );
    // A sleep that came due in a paused workflow: promoted to waiting, unclaimed. Reserve ends the
    // wait as it promotes; a version that left the wait recorded until the claim (f42eab8) may
    // have promoted it instead, a state a mixed fleet meets: planted here if the promotion did not leave it.
    const napper = await client.enqueue(AuditNap, { ms: 1_000 });
    await pollUntil(
      async () => (await client.get(napper.id))?.state,
      (state) => state === 'sleeping',
      'the nap starts',
    );
    const napWait = (await redis.hget(keys.run(napper.id), 'wait'))!;
    await client.pause({ workflow: AuditNap });
    const [, napLeft] = await pollUntil(
      () => redis.hmget(keys.run(napper.id), 'state', 'wait'),
      ([state]) => state === 'waiting',
      'the nap comes due, unclaimed',
    );
    if (napLeft === null) {
      await redis
        .multi()
        .hset(keys.run(napper.id), 'wait', napWait)
        .hdel(keys.run(napper.id), 'step:nap#1')
        .zadd(keys.workflow('audit.nap', 'sleeping'), napWait.split(' ')[1], napper.id)
        .exec();
    }
    const children = (await redis.hget(keys.run(parent.id), 'wait'))!.split(' ').slice(3);
    expect(children).toEqual([`${parent.id}/invoke:audit.child#1`, `${parent.id}/invoke:audit.child#2`]);
    const acknowledged = [sleeper, signalled, eventful, parent, napper].map((h) => h.id).concat(children);

    const clean = await auditNamespace(redis, { namespace: ns, acknowledged });
    expectConsistent(clean);
    expect(clean.waits).toEqual({ sleep: 1, signal: 1, event: 1, child: 1 });
    expect(clean.dueWaits).toBe(1);
    expect(clean.workflows[W].waits).toEqual({ sleep: 1, signal: 1, event: 1, child: 1 });
    expect(clean.states).toEqual({ waiting: 1, delayed: 4, active: 1, completed: 1, failed: 0, cancelled: 0 });

    // The damage, one per rule case.
    const [kSleeping, kSignal, kEvent, kChild] = (['sleeping', 'waiting-signal', 'waiting-event', 'waiting-child'] as const).map((s) =>
      keys.workflow(W, s),
    );
    await redis.zrem(kSleeping, sleeper.id); // 1. a sleeping run out of its index
    await redis.zadd(kSignal, 1, 'ghost'); // 2. an index member without a run
    await redis.zadd(kChild, 4503599627370496, eventful.id); // 3. a run in a second kind's index
    await redis.srem(`${keys.base}event:paid|k1`, eventful.id); // 4. an event waiter out of its event set
    await redis.sadd(`${keys.base}event:paid|k2`, signalled.id); // 5. a signal waiter in an event set
    await redis.zadd(keys.workflow(W, 'delayed'), 1, signalled.id); // 6. a wait without a deadline in delayed
    await redis.hset(keys.run(parent.id), 'waitLeft', 2); // 7. a child wait miscounted
    await redis.zrem(keys.workflow('audit.nap', 'sleeping'), napper.id); // 8. a wait that came due, out of its index early
    await redis.rpush(`${keys.base}mailbox:nobody`, 'x {"p":1}'); // 9. a mailbox of no run
    await redis.zadd(kEvent, 5, sleeper.id); // 10. a sleeping run in the event index too
    const report = await auditNamespace(redis, { namespace: ns, acknowledged });
    const rules = rulesOf(report);
    expect(rules).toEqual(
      expect.arrayContaining([
        `wait-index ${sleeper.id}`,
        'wait-index ghost',
        `wait-index ${eventful.id}`,
        `wait-index ${signalled.id}`,
        `run-place ${signalled.id}`,
        `wait-child ${parent.id}`,
        `wait-index ${napper.id}`,
        'mailbox nobody',
      ]),
    );
    expect(
      report.violations.find((v) => v.rule === 'wait-index' && v.id === sleeper.id && v.message.includes('missing from'))?.message,
    ).toContain(`missing from wf:${W}:sleeping`);
    expect(report.violations.find((v) => v.rule === 'wait-child')?.message).toContain('waitLeft 2; 1 have no outcome in the memo');
    // Nothing else: the rest of the namespace stays clean.
    expect(new Set(report.violations.map((v) => v.rule))).toEqual(new Set(['wait-index', 'run-place', 'wait-child', 'mailbox']));

    // A lost child: its record gone while the parent waits for it.
    await redis.hset(keys.run(parent.id), 'waitLeft', 1);
    await redis.del(keys.run(children[1]));
    const lost = await auditNamespace(redis, { namespace: ns });
    expect(lost.violations.find((v) => v.rule === 'wait-child')?.message).toContain(`child ${children[1]} has no run record`);
  });
});
