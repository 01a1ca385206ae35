import 'reflect-metadata';
import Redis from 'ioredis';
import { NonRetryableError, RunContext, Workflow, WorkflowFailedError } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { auditNamespace, AuditReport, expectConsistent } from '../support/audit';
import { Gates } from '../support/workflows';

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

const WF = 'audit.work';
let redis: Redis;
const apps: TestApp[] = [];
const namespaces: string[] = [];

beforeAll(() => {
  redis = rawRedis();
});
afterAll(async () => {
  held.openAll();
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
    const delayed = await client.enqueue(AuditWorkflow, {}, { delay: '1h' });
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
      active: 2, delayed: 1, due: 2, limit: 3, groupLimit: 1,
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
    const delayed = await client.enqueue(AuditWorkflow, {}, { delay: '1h' });
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
    expect(report.violations.find((v) => v.id === plain.id)?.message).toContain(`is in [wf:${WF}:g:g2:queue, wf:${WF}:queue], expected [wf:${WF}:queue]`);

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
});
