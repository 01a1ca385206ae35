import Redis from 'ioredis';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, redisUrl, TestApp, uniqueNamespace } from '../support/app';
import { namespaceKeys, pollUntil } from '../support/workflows';
import { CRON_SCHEDULE_ID, cronExecKey, SlotHolderWorkflow } from './chaos.workflows';
import { ChildWorker } from './child-worker';

jest.setTimeout(120_000);

const PROCESSES = 3;
const CONCURRENCY = 4;

/**
 * Three worker OS processes declare the same every-second schedule. Each occurrence fires exactly
 * once (its run id is `<schedule>@<occurrence ms>`: a second fire would be visible as a gap or an
 * extra execution), within a second of its time, also while every slot of every worker is held,
 * so that no worker has a reason to reserve but for the schedule.
 */
describe('a schedule shared by three worker processes', () => {
  const ns = uniqueNamespace('cron-fleet');
  const keys = new RedisKeys('sluice', ns);
  let redis: Redis;
  let producer: TestApp;
  const children: ChildWorker[] = [];

  beforeAll(async () => {
    redis = rawRedis();
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
  });

  afterAll(async () => {
    await Promise.all(children.map((child) => child.kill()));
    await producer?.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const fired = async () => Number((await redis.hget(keys.schedule(CRON_SCHEDULE_ID), 'fired')) ?? 0);

  it('fires each occurrence exactly once, within 1 s, idle and with every slot busy', async () => {
    for (let n = 0; n < PROCESSES; n++)
      children.push(new ChildWorker({ REDIS_URL: redisUrl(), NS: ns, MODE: 'cron', CONCURRENCY: String(CONCURRENCY) }));
    await Promise.all(children.map((child) => child.waitFor((m) => m.ready === true, 'ready', 90_000)));

    // Idle fleet: ten occurrences.
    await pollUntil(fired, (n) => n >= 10, 'ten fires by an idle fleet', 30_000);

    // Saturate every slot of every process, then let at least five more occurrences pass.
    const holders = await producer.client.enqueueMany(
      SlotHolderWorkflow,
      Array.from({ length: PROCESSES * CONCURRENCY }, () => ({ input: {} })),
    );
    await pollUntil(
      () => redis.scard(keys.workflow('chaos.slot-holder', 'active')),
      (n) => n === PROCESSES * CONCURRENCY,
      'every slot held',
      30_000,
    );
    const [seconds] = await redis.time();
    const saturatedFromMs = Number(seconds) * 1000 + 1000;
    const firedBefore = await fired();
    await pollUntil(fired, (n) => n >= firedBefore + 6, 'five fires by a saturated fleet', 30_000);
    const saturatedUntilMs = Number((await redis.hget(keys.schedule(CRON_SCHEDULE_ID), 'last'))!);
    expect(await redis.scard(keys.workflow('chaos.slot-holder', 'active'))).toBe(PROCESSES * CONCURRENCY);

    children.forEach((child) => child.send('go'));
    await Promise.all(holders.map((h) => h.result({ timeoutMs: 30_000 })));
    await producer.client.pauseSchedule(CRON_SCHEDULE_ID);

    const runKeys = (await namespaceKeys(redis, ns)).filter((key) => key.startsWith(keys.run(`${CRON_SCHEDULE_ID}@`)));
    const runIds = runKeys.map((key) => key.slice(keys.run('').length));
    const occurrences = runIds.map((id) => Number(id.split('@')[1])).sort((a, b) => a - b);
    await Promise.all(runIds.map((id) => producer.client.wait(id, { timeoutMs: 30_000 })));

    // One run per second from the first occurrence to the last: none missed, none doubled.
    expect(occurrences.length).toBeGreaterThanOrEqual(16);
    expect(occurrences.every((t, i) => i === 0 || t - occurrences[i - 1] === 1000)).toBe(true);
    const schedule = await producer.client.getSchedule(CRON_SCHEDULE_ID);
    expect(schedule).toMatchObject({ fired: occurrences.length, skipped: 0, source: 'code' });
    const executions = await redis.hgetall(cronExecKey(ns));
    expect(runIds.filter((id) => executions[id] !== '1')).toEqual([]);

    // Each fired within a second of its occurrence (by Redis time), the saturated stretch included.
    const created = await Promise.all(
      runIds.map(async (id) => [Number(id.split('@')[1]), Number(await redis.hget(keys.run(id), 'createdAt'))] as const),
    );
    const late = created.filter(([occurrence, at]) => at - occurrence >= 1000 || at < occurrence);
    expect(late).toEqual([]);
    expect(created.filter(([occurrence]) => occurrence >= saturatedFromMs && occurrence <= saturatedUntilMs).length).toBeGreaterThanOrEqual(
      5,
    );

    const stops = await Promise.all(children.map((child) => child.stop()));
    for (const stop of stops) expect({ code: stop.code, signal: stop.signal }).toEqual({ code: 0, signal: null });
    expectConsistent(await auditNamespace(redis, { namespace: ns, acknowledged: [...runIds, ...holders.map((h) => h.id)] }));
  });
});
