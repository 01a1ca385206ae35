import type Redis from 'ioredis';
import { LeaseLostError, QueueModuleOptions, RunContext, Workflow, WorkflowFailedError } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { ActiveRun, ActiveRuns } from '../../lib/worker/active-runs';
import { LazyAbort } from '../../lib/execution/lazy.abort';
import { parseReserveReply } from '../../lib/redis/commands/reserve.command';
import { LeaseHeartbeat } from '../../lib/worker/lease.heartbeat';
import { newCallId } from '../../lib/redis/commands/call-id';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { createdAtOf, dueInLane, enqueueArgs, enqueueKeys, FAKE_WORKER, fakePark, firstToken, waitParked } from '../support/queue-state';
import { scriptsOn } from '../support/scripts';
import { Counter, Gates, pollUntil } from '../support/workflows';

/** Regression tests for worker-side defects (one test per defect; each fails on the code before its fix). */
const executions = new Counter();
const gates = new Gates(); // the test opens gates.get(key) to let a held run finish
const begun = new Gates(); // opened by a run when it starts executing

@Workflow('rw.echo')
class EchoWorkflow {
  async run(input: { value: number }, ctx: RunContext): Promise<{ doubled: number }> {
    executions.inc(ctx.runId);
    return { doubled: input.value * 2 };
  }
}

@Workflow('rw.hold')
class HoldWorkflow {
  async run(input: { key: string }, ctx: RunContext): Promise<{ key: string; attempt: number }> {
    executions.inc(ctx.runId);
    begun.open(input.key);
    await gates.get(input.key).promise;
    return { key: input.key, attempt: ctx.attempt };
  }
}

const LONG_NAME = 'N'.repeat(10_000);

@Workflow('rw.longname', { attempts: 1 })
class LongNameWorkflow {
  async run(): Promise<never> {
    const error = new Error('thrown with a very long name');
    error.name = LONG_NAME;
    throw error;
  }
}

const WORKFLOWS = [EchoWorkflow, HoldWorkflow, LongNameWorkflow];
const unique = (label: string) => `${label}-${Math.random().toString(36).slice(2)}`;

let redis: Redis;
let apps: TestApp[] = [];
const namespaces: string[] = [];

beforeAll(() => void (redis = rawRedis()));
afterEach(async () => {
  gates.openAll(); // nothing may hold a closing app's shutdown
  await Promise.all(apps.map((app) => app.close()));
  apps = [];
});
afterAll(async () => {
  for (const ns of namespaces) await dropNamespace(redis, ns);
  await redis.quit();
});

/** A fresh namespace with app factories for it. */
function space(label: string) {
  const namespace = uniqueNamespace(label);
  namespaces.push(namespace);
  const keys = new RedisKeys('sluice', namespace);
  const start = async (options: Partial<QueueModuleOptions>) => {
    const app = await createApp(WORKFLOWS, { namespace, ...options });
    apps.push(app);
    return app;
  };
  return {
    namespace,
    keys,
    worker: (worker: QueueModuleOptions['worker'] = {}) => start({ worker: { concurrency: 5, ...worker } }),
    producer: (worker: QueueModuleOptions['worker'] = {}) => start({ worker: { ...worker, enabled: false } }),
  };
}

describe('regressions: worker', () => {
  it('a run id popped from a lane without a run record goes to the orphans list, not silently nowhere', async () => {
    const s = space('rw-orphan');
    const producer = await s.producer();
    const handle = await producer.client.enqueue(EchoWorkflow, { value: 1 });
    expect((await producer.client.get(handle.id))?.state).toBe('waiting');
    expect(await redis.del(s.keys.run(handle.id))).toBe(1); // the record is gone, its id still queued
    expect(await dueInLane(redis, s.keys, 'rw.echo')).toBe(1);

    const worker = await s.worker();
    const orphans = `${s.keys.base}orphans`;
    await pollUntil(
      () => redis.lrange(orphans, 0, -1),
      (list) => list.includes(`rw.echo ${handle.id}`),
      'the orphan to be recorded',
    );
    expect(await dueInLane(redis, s.keys, 'rw.echo')).toBe(0);
    expect(executions.get(handle.id)).toBe(0);
    expect(await redis.exists(s.keys.run(handle.id))).toBe(0); // not resurrected as a record
    // The worker carries on with real runs.
    await expect(worker.client.run(EchoWorkflow, { value: 4 }, { timeoutMs: 10_000 })).resolves.toEqual({ doubled: 8 });
  });

  it("a heartbeat that finds a stale attempt's lease lost does not abort the newer attempt of the same run", async () => {
    const s = space('rw-token');
    const LOCK_MS = 60_000;
    const scripts = scriptsOn(redis);
    const enqueue = (id: string) =>
      scripts.run('enqueue', enqueueKeys(s.keys, id), enqueueArgs(s.keys, 'rw.hold', id, { key: id }, false, LOCK_MS));
    const reserve = async () => {
      const reply = await scripts.run<unknown[]>(
        'reserve',
        [s.keys.stallGate, s.keys.call(newCallId())],
        [s.keys.base, 1, LOCK_MS, 0, 3, 256, 60_000, 'regression-worker', 0, 0, 'rw.hold'],
      );
      const { claims } = parseReserveReply(reply);
      expect(claims).toHaveLength(1);
      return claims[0];
    };
    const release = (id: string, token: string) =>
      scripts.run('release', [s.keys.run(id), s.keys.leases, s.keys.limits, s.keys.seq], [s.keys.base, id, token]);
    /** Two attempts of one run, through the real scripts: the first handed back, the second holding the lease. */
    const twoAttempts = async (id: string) => {
      await enqueue(id);
      const first = await reserve();
      expect(await release(id, first.token)).toBe(1);
      const second = await reserve();
      expect([first.id, second.id, second.attempt]).toEqual([id, id, 2]);
      expect(second.token).not.toBe(first.token);
      return [first.token, second.token];
    };
    const attempt = (id: string, token: string): ActiveRun => ({ id, token, abort: new LazyAbort(), leaseConfirmedAt: Date.now() });

    const [a1, a2] = await twoAttempts('run-a');
    const [b1] = await twoAttempts('run-b');
    expect(await redis.hmget(s.keys.run('run-a'), 'state', 'token')).toEqual(['active', a2]);

    // This process runs the newer attempt of run-a (and, as a control, a stale attempt of run-b).
    const active = new ActiveRuns();
    const newerA = attempt('run-a', a2);
    const staleB = attempt('run-b', b1);
    active.add(newerA);
    active.add(staleB);
    const heartbeat = new LeaseHeartbeat(scripts, s.keys, active, LOCK_MS);
    const leaseA = await redis.zscore(s.keys.leases, 'run-a');

    // A stale attempt of run-a (e.g. one that finished late) is extended once more: its lease is lost.
    await heartbeat.extend([attempt('run-a', a1), staleB]);
    expect(newerA.abort.reason).toBeUndefined();
    expect(newerA.abort.signal.aborted).toBe(false);
    expect(staleB.abort.reason).toBeInstanceOf(LeaseLostError); // a lost lease whose token matches is aborted
    expect(await redis.zscore(s.keys.leases, 'run-a')).toBe(leaseA); // the stale token renewed nothing
    // What the script reports for those two: both lost, each with the token that lost it and the run's state (active: another attempt holds it; not cancelled).
    expect(await scripts.run('extend-leases', [s.keys.leases], [s.keys.base, LOCK_MS, 'run-a', a1, 'run-b', b1])).toEqual([
      'run-a',
      a1,
      'active',
      '',
      'run-b',
      b1,
      'active',
      '',
    ]);

    // A regular beat over what this process runs keeps the newer attempt going.
    await heartbeat.beat();
    expect(newerA.abort.signal.aborted).toBe(false);
    expect(await redis.hmget(s.keys.run('run-a'), 'state', 'token')).toEqual(['active', a2]);
  });

  it("an error's name is clipped before it is stored", async () => {
    const s = space('rw-name');
    const app = await s.worker();
    const id = unique('long-name');
    const error = await app.client.run(LongNameWorkflow, undefined as never, { id, timeoutMs: 10_000 }).then(
      () => new Error('resolved instead of failing'),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(WorkflowFailedError);
    const { causeName, causeMessage } = error as WorkflowFailedError;
    expect(causeMessage).toBe('thrown with a very long name');
    expect(causeName.length).toBeGreaterThanOrEqual(200);
    expect(causeName.length).toBeLessThanOrEqual(201); // 200 characters and an ellipsis
    expect(LONG_NAME.startsWith(causeName.replace(/…$/, ''))).toBe(true);
    const stored = await app.client.get(id);
    expect(stored).toMatchObject({ state: 'failed', error: { name: causeName } });
    expect((error as Error).message.length).toBeLessThan(1_000);
  });

  it('a fast-path handoff has its lease renewed as soon as its worker pops it', async () => {
    const s = space('rw-handoff');
    const WORKER_LOCK_MS = 30_000; // heartbeats every 10 s: none falls in this test's window
    const HANDOFF_LOCK_MS = 300; // the enqueuer's lease for a handoff whose parked entry names none
    const beforeWorker = Date.now(); // the worker's heartbeat timer starts after this
    await s.worker({ lockMs: WORKER_LOCK_MS, stalledIntervalMs: 120_000 }); // its one stalled scan runs at start
    const producer = await s.producer({ lockMs: HANDOFF_LOCK_MS });
    await waitParked(redis, s.keys, 'rw.hold');
    // An announcement without a lease length, expiring after the real worker's, so the enqueue
    // picks it (it takes the worker parked last): the handoff then gets the enqueuer's 300 ms
    // lease. The real worker, blocked on the wake list, takes the handoff.
    const parked = s.keys.workflow('rw.hold', 'parked');
    const [, realExpiry] = await pollUntil(
      () => redis.zrange(parked, 0, 0, 'WITHSCORES'),
      (entry) => entry.length === 2,
      "the worker's park entry",
    );
    await fakePark(redis, s.keys, 'rw.hold', Number(realExpiry) + 1);

    const handle = await producer.client.enqueue(HoldWorkflow, { key: 'handoff' });
    expect((await producer.client.get(handle.id))?.state).toBe('active'); // fast-pathed
    expect(await redis.zscore(parked, FAKE_WORKER)).toBeNull(); // its lease came from the fake entry: 300 ms
    await begun.get('handoff').promise;
    const createdAt = await createdAtOf(redis, s.keys, handle.id);

    // No periodic heartbeat can have run before this deadline, nor a stalled scan: only the
    // renewal on pop can move the lease past createdAt + the worker's lockMs.
    const window = beforeWorker + WORKER_LOCK_MS / 3 - 1_000 - Date.now();
    if (window < 500) throw new Error(`setup took too long (${WORKER_LOCK_MS / 3 - window} ms) for a heartbeat-free window`);
    const lease = await pollUntil(
      () => redis.zscore(s.keys.leases, handle.id),
      (score) => Number(score) >= createdAt + WORKER_LOCK_MS,
      'the handoff lease to be renewed',
      Math.min(window, 3_000),
    );
    expect(Number(lease)).toBeGreaterThan(createdAt + HANDOFF_LOCK_MS);
    // Still the handed-off attempt (not a re-claim after a stall).
    expect(await redis.hmget(s.keys.run(handle.id), 'state', 'token', 'attempts', 'stalls')).toEqual([
      'active',
      firstToken(createdAt),
      '1',
      null, // a lean record: no stall counted
    ]);

    gates.open('handoff');
    await expect(handle.result({ timeoutMs: 10_000 })).resolves.toEqual({ key: 'handoff', attempt: 1 });
    expect(executions.get(handle.id)).toBe(1);
  });
});
