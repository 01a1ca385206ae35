import Redis from 'ioredis';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, redisUrl, TestApp, uniqueNamespace } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { within } from '../support/flow';
import { signalProcess } from '../support/redis-process';
import { deferred, enterMonitor } from '../support/workflows';
import { CHAOS_HOOKS, CHAOS_NS, CHAOS_REDIS, stepCountKey, ZombieWorkflow } from './chaos.workflows';
import { ChildWorker } from './child-worker';

/**
 * A zombie worker: a process frozen (SIGSTOP) past its leases while another worker finishes its
 * runs, then thawed (SIGCONT). It carries on with tokens it no longer holds: its step write and
 * its completion reach Redis and are refused. The finished results stay the other worker's, the
 * run records do not change, and the namespace stays consistent.
 *
 * Its leases are long (no heartbeat falls due during the test) and are ended by moving their
 * expiry into the past while it is frozen. With a short lease the thawed zombie's overdue heartbeat
 * races its writes: when the heartbeat's answer comes first, the zombie learns it lost the runs and
 * never sends them (correct too: test/e2e/regressions-worker.spec.ts covers it), and this test would prove nothing
 * about Redis refusing them.
 */
jest.setTimeout(90_000);

const WF = 'chaos.zombie';

describe('a worker frozen past its lease, then thawed', () => {
  const ns = uniqueNamespace('zombie');
  const keys = new RedisKeys('sluice', ns);
  let redis: Redis;
  let producer: TestApp;
  let rescuer: TestApp | undefined;
  let zombie: ChildWorker | undefined;
  let monitor: Redis | undefined;
  let monitorBase: Redis | undefined;

  beforeAll(async () => {
    redis = rawRedis();
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
  });

  afterAll(async () => {
    monitor?.disconnect();
    monitorBase?.disconnect();
    await zombie?.kill(); // SIGKILL ends a stopped process too
    await rescuer?.close();
    await producer?.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('has its step write and its completion refused; the other worker’s results stand', async () => {
    // Two slots, two runs: the zombie is saturated (no blocking pop pending) when it freezes.
    zombie = new ChildWorker({
      REDIS_URL: redisUrl(),
      NS: ns,
      MODE: 'zombie',
      CONCURRENCY: '2',
      LOCK_MS: String(10 * 60_000),
      STALLED_INTERVAL_MS: '500',
    });
    await zombie.waitFor((m) => m.ready === true, 'ready', 60_000);
    const zombiePid = zombie.pid;

    // `middle` pauses between its steps, `end` after both.
    const middle = await producer.client.enqueue(ZombieWorkflow, { pauseAt: 'middle' });
    const end = await producer.client.enqueue(ZombieWorkflow, { pauseAt: 'end' });
    await zombie.waitFor((m) => m.paused === middle.id, 'pause of middle');
    await zombie.waitFor((m) => m.paused === end.id, 'pause of end');
    const staleTokens = {
      middle: await redis.hget(keys.run(middle.id), 'token'),
      end: await redis.hget(keys.run(end.id), 'token'),
    };
    expect(await redis.hmget(keys.run(middle.id), 'state', 'attempts')).toEqual(['active', '1']);
    expect(await redis.hmget(keys.run(end.id), 'state', 'attempts')).toEqual(['active', '1']);

    await signalProcess(zombiePid, 'SIGSTOP');

    // Its leases run out; another worker recovers both runs and finishes them.
    expect(await redis.zadd(keys.leases, 'XX', 'CH', 1, middle.id, 1, end.id)).toBe(2);
    rescuer = await createApp(
      [
        ZombieWorkflow,
        { provide: CHAOS_REDIS, useValue: redis },
        { provide: CHAOS_NS, useValue: ns },
        { provide: CHAOS_HOOKS, useValue: {} },
      ],
      { namespace: ns, worker: { concurrency: 5, lockMs: 1000, stalledIntervalMs: 250 } },
    );
    const [middleResult, endResult] = await Promise.all([middle.result({ timeoutMs: 30_000 }), end.result({ timeoutMs: 30_000 })]);
    expect(middleResult).toEqual({
      first: `first by pid ${zombiePid}`,
      second: `second by pid ${process.pid}`,
      attempt: 2,
      by: process.pid,
    });
    expect(endResult).toEqual({ first: `first by pid ${zombiePid}`, second: `second by pid ${zombiePid}`, attempt: 2, by: process.pid });
    await rescuer.close();
    rescuer = undefined;

    const settled = async () => ({
      middle: await redis.hgetall(keys.run(middle.id)),
      end: await redis.hgetall(keys.run(end.id)),
      leases: await redis.zrange(keys.leases, 0, -1),
      active: await redis.smembers(keys.workflow(WF, 'active')),
      stats: await redis.hgetall(keys.workflow(WF, 'stats')),
    });
    const before = await settled();
    expect(before.middle).toMatchObject({ state: 'completed', attempts: '2', stalls: '1' });
    expect(before.end).toMatchObject({ state: 'completed', attempts: '2', stalls: '1' });
    expect(before.middle.token).not.toBe(staleTokens.middle);
    expect(await redis.hgetall(stepCountKey(ns))).toEqual({
      [`${middle.id}:first`]: '1',
      [`${middle.id}:second`]: '1',
      [`${end.id}:first`]: '1',
      [`${end.id}:second`]: '1',
    });

    // Watch every command the server executes while the zombie carries on.
    monitorBase = new Redis(redisUrl());
    monitor = await enterMonitor(monitorBase);
    const seen: string[][] = [];
    const marker = `zombie-marker-${ns}`;
    const markerSeen = deferred();
    monitor.on('monitor', (_time: string, args: string[]) => {
      seen.push(args.map(String));
      if (String(args[0]).toLowerCase() === 'echo' && args[1] === marker) markerSeen.resolve();
    });

    zombie.send('resume'); // queued until it runs again
    await signalProcess(zombiePid, 'SIGCONT');
    // Stopping drains its runs: `middle` has run its second step and `end` has tried to complete by the time it exits.
    const stop = await zombie.stop(30_000);
    expect({ code: stop.code, signal: stop.signal }).toEqual({ code: 0, signal: null });

    // Every command the zombie sent has been executed (and fed to the monitor) before this marker.
    await redis.echo(marker);
    await within(markerSeen.promise, 10_000, 'the monitor seeing the marker');
    monitor.disconnect();
    monitorBase.disconnect();
    monitor = monitorBase = undefined;

    // Nothing changed.
    expect(await settled()).toEqual(before);

    // Yet the zombie's token-checked writes reached Redis — the step result of `middle`, and the
    // completion of `end` — and were refused.
    const carries = (args: string[], ...values: string[]) => args.some((_, i) => values.every((v, j) => args[i + j] === v));
    const scripts = seen.filter((args) => /^fcall$|^evalsha$|^eval$/i.test(args[0]));
    expect(scripts.filter((args) => carries(args, middle.id, staleTokens.middle!, 'second#1'))).toHaveLength(1);
    const endWrites = scripts.filter((args) =>
      args.some((_, i) => args[i] === end.id && args[i + 1] === staleTokens.end && (args[i + 2] ?? '').startsWith('{')),
    );
    expect(endWrites).toHaveLength(1);
    expect(JSON.parse(endWrites[0][endWrites[0].indexOf(staleTokens.end!) + 1])).toEqual({
      first: `first by pid ${zombiePid}`,
      second: `second by pid ${zombiePid}`,
      attempt: 1,
      by: zombiePid,
    });

    // The refusal reached the workflow as LeaseLostError (the step threw instead of returning).
    expect(await zombie.waitFor((m) => m.stepFailed === middle.id, 'the refused step of middle', 1_000)).toMatchObject({
      step: 'second',
      error: 'LeaseLostError',
    });
    // Its step's side effect did happen (at-least-once, as docs/guarantees.md says); the results are the rescuer's.
    expect(await producer.client.get(middle.id)).toMatchObject({ state: 'completed', result: middleResult });
    expect(await producer.client.get(end.id)).toMatchObject({ state: 'completed', result: endResult });
    expect(await redis.hgetall(stepCountKey(ns))).toEqual({
      [`${middle.id}:first`]: '1',
      [`${middle.id}:second`]: '2',
      [`${end.id}:first`]: '1',
      [`${end.id}:second`]: '1',
    });
    expectConsistent(await auditNamespace(redis, { namespace: ns, acknowledged: [middle.id, end.id] }));
  });
});
