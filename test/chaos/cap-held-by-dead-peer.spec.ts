import { auditNamespace, expectConsistent } from '../support/audit';
import type { Type } from '@nestjs/common';
import Redis from 'ioredis';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, redisUrl, TestApp, uniqueNamespace } from '../support/app';
import { sampleActive, waitParked, watchLane } from '../support/queue-state';
import { pollUntil } from '../support/workflows';
import {
  CappedWorkflow,
  CHAOS_HOOKS,
  CHAOS_NS,
  CHAOS_REDIS,
  ChaosHooks,
  completionsKey,
  stepCountKey,
  StallWorkflow,
} from './chaos.workflows';
import { ChildWorker } from './child-worker';

jest.setTimeout(90_000);

/** Every process of these tests leases for 500 ms, heartbeats every ~166 ms and scans every 250 ms. */
const FAST = { lockMs: 500, stalledIntervalMs: 250 };
const CHILD_ENV = { CONCURRENCY: '5', LOCK_MS: '500', STALLED_INTERVAL_MS: '250' };

let redis: Redis;
const children: ChildWorker[] = [];
const apps: TestApp[] = [];
const namespaces: string[] = [];

beforeAll(() => {
  redis = rawRedis();
});
afterAll(async () => {
  await Promise.all(children.map((child) => child.kill()));
  await Promise.all(apps.map((app) => app.close()));
  for (const ns of namespaces) await dropNamespace(redis, ns);
  await redis.quit();
});

function space() {
  const ns = uniqueNamespace('peer');
  namespaces.push(ns);
  const keys = new RedisKeys('sluice', ns);
  const start = async (providers: Parameters<typeof createApp>[0], worker: object) => {
    const app = await createApp(providers, { namespace: ns, worker: { ...FAST, ...worker } });
    apps.push(app);
    return app;
  };
  const chaos = (workflow: Type<unknown>, hooks: ChaosHooks = {}) => [
    workflow,
    { provide: CHAOS_REDIS, useValue: redis },
    { provide: CHAOS_NS, useValue: ns },
    { provide: CHAOS_HOOKS, useValue: hooks },
  ];
  const fork = (mode: string) => {
    const child = new ChildWorker({ REDIS_URL: redisUrl(), NS: ns, MODE: mode, ...CHILD_ENV });
    children.push(child);
    return child;
  };
  return { ns, keys, start, chaos, fork };
}

async function killed(child: ChildWorker): Promise<void> {
  child.proc.kill('SIGKILL');
  expect(await child.exited).toEqual({ code: null, signal: 'SIGKILL' });
}

describe('a worker process killed while it holds a run', () => {
  it('a fast-pathed run taken by a worker that dies is recovered by another, its finished step replayed', async () => {
    const s = space();
    // The handoff's first lease is the enqueuer's lockMs: the producer uses the fleet's.
    const producer = await s.start([], { enabled: false });
    const child = s.fork('stall');
    await child.waitFor((m) => m.ready === true, 'ready', 60_000);
    await waitParked(redis, s.keys, 'chaos.stall');

    const lane = await watchLane(redis, s.keys, 'chaos.stall');
    const handle = await producer.client.enqueue(StallWorkflow, { label: 'handed-over' });
    expect(await producer.client.get(handle.id)).toMatchObject({ state: 'active', attempts: 1 });
    expect(await lane.writes()).toEqual([]); // never went through the queue
    await child.waitFor((m) => m.started === handle.id, 'run start');
    const childPid = child.pid;
    await killed(child);

    await s.start(s.chaos(StallWorkflow), { concurrency: 5 });
    expect(await handle.result({ timeoutMs: 20_000 })).toEqual({
      first: `first by pid ${childPid}`,
      second: `second by pid ${process.pid}`,
      attempt: 2,
    });
    expect(await redis.hgetall(stepCountKey(s.ns))).toEqual({ [`${handle.id}:first`]: '1', [`${handle.id}:second`]: '1' });
    expect(await redis.hmget(s.keys.run(handle.id), 'state', 'attempts', 'stalls')).toEqual(['completed', '2', '1']);
    await pollUntil(
      () => redis.llen(s.keys.wake('chaos.stall')),
      (n) => n === 0,
      'an empty wake list',
    );
    expect(await redis.zcard(s.keys.leases)).toBe(0);
    expect(await redis.scard(s.keys.workflow('chaos.stall', 'active'))).toBe(0);
    expectConsistent(await auditNamespace(redis, { namespace: s.ns }));
  });

  it('holds off a live worker from a cap of 1 until the stall recovery frees the dead peer’s slot', async () => {
    const s = space();
    const active = s.keys.workflow('chaos.capped', 'active');
    const producer = await s.start([], { enabled: false });
    const child = s.fork('capped');
    await child.waitFor((m) => m.ready === true, 'ready', 60_000);
    expect(await redis.hget(s.keys.limits, 'wf:chaos.capped')).toBe('1');

    const first = await producer.client.enqueue(CappedWorkflow, { label: 'held by the doomed child' });
    await child.waitFor((m) => m.started === first.id, 'run start');
    const second = await producer.client.enqueue(CappedWorkflow, { label: 'waits for the slot' });
    expect((await producer.client.get(second.id))?.state).toBe('waiting');

    // At the second run's start, record whether the first one's slot had been freed by recovery.
    let atSecondStart: unknown;
    const hooks: ChaosHooks = {
      beforeWork: async (runId) => {
        if (runId !== second.id) return;
        const replies = await redis.multi().hget(s.keys.run(first.id), 'stalls').sismember(active, first.id).exec();
        atSecondStart = replies?.map(([, value]) => value);
      },
    };
    await s.start(s.chaos(CappedWorkflow, hooks), { concurrency: 5 });
    // Both workers have reserved and blocked: the live one found no room under the cap.
    await waitParked(redis, s.keys, 'chaos.capped', 2);
    expect((await producer.client.get(second.id))?.state).toBe('waiting');
    expect(await redis.smembers(active)).toEqual([first.id]);

    const sampler = sampleActive(redis, active);
    const childPid = child.pid;
    await killed(child);
    const results = await Promise.all([first, second].map((h) => h.result({ timeoutMs: 20_000 })));
    const sampled = await sampler.stop();

    expect(atSecondStart).toEqual(['1', 0]);
    expect(results).toEqual([
      { first: `first by pid ${childPid}`, attempt: 2 },
      { first: `first by pid ${process.pid}`, attempt: 1 },
    ]);
    expect(await redis.hgetall(completionsKey(s.ns))).toEqual({ [first.id]: '1', [second.id]: '1' });
    expect(await redis.hgetall(stepCountKey(s.ns))).toEqual({ [`${first.id}:first`]: '1', [`${second.id}:first`]: '1' });
    expect(sampled.max).toBeLessThanOrEqual(1);
    expect(sampled.max).toBe(1);
    expect(sampled.count).toBeGreaterThan(10);
    expect(await redis.hmget(s.keys.run(first.id), 'state', 'stalls')).toEqual(['completed', '1']);
    expect(await redis.scard(active)).toBe(0);
    expectConsistent(await auditNamespace(redis, { namespace: s.ns }));
    expect(await redis.zcard(s.keys.leases)).toBe(0);
  });
});
