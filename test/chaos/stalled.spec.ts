import { auditNamespace, expectConsistent } from '../support/audit';
import Redis from 'ioredis';
import { createApp, dropNamespace, rawRedis, redisUrl, TestApp, uniqueNamespace } from '../support/app';
import { CHAOS_HOOKS, CHAOS_NS, CHAOS_REDIS, stepCountKey, StallWorkflow } from './chaos.workflows';
import { ChildWorker } from './child-worker';

jest.setTimeout(60_000);

describe('a worker process killed mid-run', () => {
  const ns = uniqueNamespace('stall');
  const base = `{sluice:${ns}}:`;
  let redis: Redis;
  let producer: TestApp;
  let rescuer: TestApp | undefined;
  let child: ChildWorker | undefined;

  beforeAll(async () => {
    redis = rawRedis();
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
  });

  afterAll(async () => {
    await child?.kill();
    await rescuer?.close();
    await producer?.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('leaves a lease that another worker recovers, replaying the finished step', async () => {
    const handle = await producer.client.enqueue(StallWorkflow, { label: 'doomed' });

    child = new ChildWorker({ REDIS_URL: redisUrl(), NS: ns, MODE: 'stall', CONCURRENCY: '5', LOCK_MS: '500', STALLED_INTERVAL_MS: '250' });
    await child.waitFor((m) => m.started === handle.id, 'run start', 60_000);
    const childPid = child.pid;
    child.proc.kill('SIGKILL');
    expect(await child.exited).toEqual({ code: null, signal: 'SIGKILL' });

    // The dead worker left the run active with a lease, its first step persisted.
    const orphan = await producer.client.get(handle.id);
    expect(orphan).toMatchObject({ state: 'active', attempts: 1, failures: 0 });
    expect(await redis.zscore(`${base}leases`, handle.id)).not.toBeNull();
    expect(await redis.sismember(`${base}wf:chaos.stall:active`, handle.id)).toBe(1);
    expect(await redis.hgetall(stepCountKey(ns))).toEqual({ [`${handle.id}:first`]: '1' });

    rescuer = await createApp(
      [
        StallWorkflow,
        { provide: CHAOS_REDIS, useValue: redis },
        { provide: CHAOS_NS, useValue: ns },
        { provide: CHAOS_HOOKS, useValue: {} },
      ],
      { namespace: ns, worker: { concurrency: 5, lockMs: 500, stalledIntervalMs: 250 } },
    );
    const result = await handle.result({ timeoutMs: 20_000 });

    // The first step's result is the memo written by the killed process; only the second ran here.
    expect(result).toEqual({ first: `first by pid ${childPid}`, second: `second by pid ${process.pid}`, attempt: 2 });
    expect(await redis.hgetall(stepCountKey(ns))).toEqual({ [`${handle.id}:first`]: '1', [`${handle.id}:second`]: '1' });
    expect(await producer.client.get(handle.id)).toMatchObject({ state: 'completed', attempts: 2, failures: 0 });
    expect(await redis.hget(`${base}run:${handle.id}`, 'stalls')).toBe('1');
    expect(await redis.zcard(`${base}leases`)).toBe(0);
    expect(await redis.scard(`${base}wf:chaos.stall:active`)).toBe(0);
    expectConsistent(await auditNamespace(redis, { namespace: ns, acknowledged: [handle.id] }));
  });
});
