import { auditNamespace, expectConsistent } from '../support/audit';
import Redis from 'ioredis';
import { createApp, dropNamespace, rawRedis, redisUrl, TestApp, uniqueNamespace } from '../support/app';
import { counterKey, DrainWorkflow } from './chaos.workflows';
import { ChildWorker } from './child-worker';

jest.setTimeout(120_000);

const RUNS = 2_000;
const PROCESSES = 4;

describe('four worker processes drain a backlog', () => {
  const ns = uniqueNamespace('multi');
  const base = `{sluice:${ns}}:`;
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

  it(`runs each of ${RUNS} runs exactly once across ${PROCESSES} OS processes`, async () => {
    // The backlog exists before any worker does.
    const handles = await producer.client.enqueueMany(
      DrainWorkflow,
      Array.from({ length: RUNS }, (_, i) => ({ input: { i } })),
    );
    expect(handles.every((h) => h.created)).toBe(true);
    expect(new Set(handles.map((h) => h.id)).size).toBe(RUNS);
    expect((await producer.client.stats({ workflow: DrainWorkflow })).workflows['chaos.drain'].waiting).toBe(RUNS);

    for (let n = 0; n < PROCESSES; n++) children.push(new ChildWorker({ REDIS_URL: redisUrl(), NS: ns, MODE: 'drain', CONCURRENCY: '20' }));
    await Promise.all(children.map((child) => child.waitFor((m) => m.ready === true, 'ready', 90_000)));
    // Each child holds its first runs at their start until every child has claimed some, so the
    // work is shared however unevenly the children finished booting.
    await Promise.all(children.map((child) => child.waitFor((m) => typeof m.claimed === 'string', 'first claim', 30_000)));
    children.forEach((child) => child.send('go'));

    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 90_000 })));
    expect(results).toEqual(handles.map((_, i) => ({ i })));

    const stops = await Promise.all(children.map((child) => child.stop()));
    for (const stop of stops) {
      expect({ code: stop.code, signal: stop.signal }).toEqual({ code: 0, signal: null });
      expect(stop.report.executed).toBeGreaterThan(0);
    }
    const executed = stops.map((stop) => stop.report.executed as number);
    expect(executed.reduce((a, b) => a + b, 0)).toBe(RUNS);

    // The per-run counter, incremented inside the step, is 1 for every run and no other field exists.
    const counters = await redis.hgetall(counterKey(ns));
    expect(Object.keys(counters).sort()).toEqual(handles.map((h) => h.id).sort());
    expect(Object.entries(counters).filter(([, n]) => n !== '1')).toEqual([]);

    const pipeline = redis.pipeline();
    for (const h of handles) pipeline.hmget(`${base}run:${h.id}`, 'state', 'attempts', 'failures');
    const rows = ((await pipeline.exec()) ?? []).map(([error, row]) => {
      if (error) throw error;
      // A lean run record has no `failures` while it is 0.
      const [state, attempts, failures] = row as (string | null)[];
      return [state, attempts, failures ?? '0'].join('/');
    });
    expect(rows.filter((row) => row !== 'completed/1/0')).toEqual([]);
    expect(rows).toHaveLength(RUNS);

    expect(await redis.scard(`${base}wf:chaos.drain:active`)).toBe(0);
    expect(await redis.zcard(`${base}leases`)).toBe(0);
    expectConsistent(await auditNamespace(redis, { namespace: ns, acknowledged: handles.map((h) => h.id) }));
    expect((await producer.client.stats({ workflow: DrainWorkflow })).workflows['chaos.drain'].waiting).toBe(0);
  });
});
