import type Redis from 'ioredis';
import { NonRetryableError, QueueModuleOptions, RunContext, Step, Workflow, WorkflowFailedError } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { MAX_BLOCK_MS } from '../../lib/worker/wake.listener';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { scriptsOn } from '../support/scripts';
import {
  dueInLane,
  enqueueArgs,
  enqueueKeys,
  FAKE_WORKER,
  fakePark,
  createdAtOf,
  firstToken,
  handoffEntry,
  isDueInLane,
  redisTimeMs,
  waitParked,
  watchLane,
} from '../support/queue-state';
import { Counter, Gates, monitorCommands, pollUntil } from '../support/workflows';

/**
 * The enqueue fast path (lua/enqueue.lua): a due run with nothing ahead of it, room under its
 * workflow cap and a parked worker is claimed by the enqueue itself and handed over through the
 * wake list. Observable proof that a run never went through the queue: no write to its lane's
 * queue list or waiting zset while it was enqueued (keyspace events, see watchLane) — a run queued
 * and claimed at once leaves no other trace there.
 */
const gates = new Gates(); // the test opens gates.get(key) to let a held run finish
const begun = new Gates(); // opened by a run when it starts executing
const counts = new Counter();
const order: string[] = [];

interface Input {
  key: string;
  hold?: boolean;
}
async function hold(input: Input, ctx: RunContext) {
  counts.inc(`${ctx.runId}:run`);
  order.push(input.key);
  begun.open(input.key);
  if (input.hold) await gates.get(input.key).promise;
  return { key: input.key, attempt: ctx.attempt };
}

@Workflow('fp.hold')
class HoldWorkflow {
  run(input: Input, ctx: RunContext) {
    return hold(input, ctx);
  }
}
@Workflow('fp.capped', { concurrency: 1 })
class CappedWorkflow {
  run(input: Input, ctx: RunContext) {
    return hold(input, ctx);
  }
}

@Workflow('fp.outcome', { attempts: 3, backoff: { delayMs: 0 } })
class OutcomeWorkflow {
  async run(input: { key: string; mode: 'ok' | 'reject' | 'flaky' }, ctx: RunContext) {
    counts.inc(`${ctx.runId}:run`);
    await gates.get(input.key).promise;
    const stepped = await this.record(ctx.runId);
    if (input.mode === 'reject') throw new NonRetryableError(`${input.key} rejected`);
    if (input.mode === 'flaky' && ctx.attempt === 1) throw new Error('fails once, after its step');
    return { stepped, attempt: ctx.attempt };
  }

  @Step() async record(runId: string): Promise<number> {
    return counts.inc(`${runId}:step`);
  }
}

const WORKFLOWS = [HoldWorkflow, CappedWorkflow, OutcomeWorkflow];
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

/** A fresh namespace with app factories and raw readers for it. */
function space() {
  const ns = uniqueNamespace('fp');
  namespaces.push(ns);
  const keys = new RedisKeys('sluice', ns);
  const start = async (options: Partial<QueueModuleOptions>) => {
    const app = await createApp(WORKFLOWS, { namespace: ns, ...options });
    apps.push(app);
    return app;
  };
  return {
    keys,
    worker: (worker: QueueModuleOptions['worker'] = {}) => start({ worker: { concurrency: 5, ...worker } }),
    producer: (options: Partial<QueueModuleOptions> = {}) => start({ ...options, worker: { ...options.worker, enabled: false } }),
    raw: (id: string, ...fields: string[]) => redis.hmget(keys.run(id), ...fields),
  };
}

describe('enqueue fast path', () => {
  it('is taken when the queue is empty, the cap has room and a worker is parked', async () => {
    const s = space();
    await s.worker();
    const producer = await s.producer();
    await waitParked(redis, s.keys, 'fp.hold');
    const lane = await watchLane(redis, s.keys, 'fp.hold');
    const h = await producer.client.enqueue(HoldWorkflow, { key: 'taken', hold: true });
    expect(await producer.client.get(h.id)).toMatchObject({ state: 'active', attempts: 1 });
    const [token, startedAt] = await s.raw(h.id, 'token', 'startedAt');
    // Claimed by the enqueue itself: the first token, started in the call that created it (its
    // generated id carries the producer's clock, which on this machine is not after Redis's).
    const createdAt = await createdAtOf(redis, s.keys, h.id);
    expect(token).toBe(firstToken(createdAt));
    expect(Number(startedAt)).toBeGreaterThanOrEqual(createdAt);
    expect(await lane.writes()).toEqual([]); // never queued as due
    expect(await dueInLane(redis, s.keys, 'fp.hold')).toBe(0);
    expect(await redis.sismember(s.keys.workflow('fp.hold', 'active'), h.id)).toBe(1);
    expect(await redis.zscore(s.keys.leases, h.id)).not.toBeNull();
    await begun.get('taken').promise;
    gates.open('taken');
    expect(await h.result({ timeoutMs: 10_000 })).toEqual({ key: 'taken', attempt: 1 });
    expect(counts.get(`${h.id}:run`)).toBe(1);
    expect(await s.raw(h.id, 'state', 'attempts', 'stalls')).toEqual(['completed', '1', null]); // never stalled (a lean record)
  });

  it('is not taken when no worker is parked (none at all, or only an expired entry)', async () => {
    const s = space();
    const producer = await s.producer();
    expect(await redis.zcard(s.keys.workflow('fp.hold', 'parked'))).toBe(0);
    const first = await producer.client.enqueue(HoldWorkflow, { key: 'nobody-1' });
    expect(await producer.client.get(first.id)).toMatchObject({ state: 'waiting', attempts: 0 });
    const t = space();
    await fakePark(redis, t.keys, 'fp.hold', (await redisTimeMs(redis)) - 1);
    const other = await t.producer();
    const second = await other.client.enqueue(HoldWorkflow, { key: 'nobody-2' });
    expect(await other.client.get(second.id)).toMatchObject({ state: 'waiting', attempts: 0 });
    for (const [space_, id] of [
      [s, first.id],
      [t, second.id],
    ] as const) {
      expect(await isDueInLane(redis, space_.keys, 'fp.hold', id)).toBe(true);
      expect(await redis.lrange(space_.keys.wake('fp.hold'), 0, -1)).toEqual(['1']);
      expect(await redis.scard(space_.keys.workflow('fp.hold', 'active'))).toBe(0);
      expect(await redis.zcard(space_.keys.leases)).toBe(0);
    }
  });

  it("is not taken once the parked worker stopped: its stop removes its entry from each workflow's parked set", async () => {
    const s = space();
    const worker = await s.worker();
    for (const name of ['fp.hold', 'fp.capped', 'fp.outcome']) await waitParked(redis, s.keys, name);
    const producer = await s.producer();
    await worker.close();
    apps = apps.filter((app) => app !== worker);
    for (const name of ['fp.hold', 'fp.capped', 'fp.outcome']) expect(await redis.zcard(s.keys.workflow(name, 'parked'))).toBe(0);
    const run = await producer.client.enqueue(HoldWorkflow, { key: 'after-stop' });
    expect(await producer.client.get(run.id)).toMatchObject({ state: 'waiting', attempts: 0 });
    expect(await isDueInLane(redis, s.keys, 'fp.hold', run.id)).toBe(true);
  });

  it('is not taken when disabled: the option is the only difference', async () => {
    for (const fastPath of [false, true]) {
      const s = space();
      await fakePark(redis, s.keys, 'fp.hold');
      const producer = await s.producer({ fastPath });
      const input = { key: `option-${fastPath}` };
      const h = await producer.client.enqueue(HoldWorkflow, input);
      const run = await producer.client.get(h.id);
      const wake = await redis.lrange(s.keys.wake('fp.hold'), 0, -1);
      const parked = await redis.zscore(s.keys.workflow('fp.hold', 'parked'), FAKE_WORKER);
      if (fastPath) {
        expect({ state: run?.state, wake, parked }).toEqual({
          state: 'active',
          wake: [await handoffEntry(redis, s.keys, h.id, input)],
          parked: null,
        });
      } else {
        expect({ state: run?.state, wake, parked: parked !== null }).toEqual({ state: 'waiting', wake: ['1'], parked: true });
      }
    }
  });

  it('is not taken when due runs are waiting; priority then FIFO order holds', async () => {
    const s = space();
    await fakePark(redis, s.keys, 'fp.hold');
    const off = await s.producer({ fastPath: false });
    const on = await s.producer();
    const r1 = await off.client.enqueue(HoldWorkflow, { key: 'prio-r1' });
    const r2 = await off.client.enqueue(HoldWorkflow, { key: 'prio-r2' });
    // As if a worker had taken the wake marker: only the waiting runs stand in the way now.
    await redis.del(s.keys.wake('fp.hold'));
    const r3 = await on.client.enqueue(HoldWorkflow, { key: 'prio-r3' }, { priority: 5 });
    const r4 = await on.client.enqueue(HoldWorkflow, { key: 'prio-r4' });
    const handles = [r1, r2, r3, r4];
    for (const h of handles) expect((await on.client.get(h.id))?.state).toBe('waiting');
    expect(await redis.zscore(s.keys.workflow('fp.hold', 'parked'), FAKE_WORKER)).not.toBeNull();
    await s.worker({ concurrency: 1 });
    await Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })));
    expect(order.filter((key) => key.startsWith('prio-'))).toEqual(['prio-r3', 'prio-r1', 'prio-r2', 'prio-r4']);
  });

  it('is taken when only future (delayed) runs exist', async () => {
    const s = space();
    await s.worker();
    const producer = await s.producer();
    await waitParked(redis, s.keys, 'fp.hold');
    const later = await producer.client.enqueue(HoldWorkflow, { key: 'later' }, { delayMs: '60s' });
    expect((await producer.client.get(later.id))?.state).toBe('delayed');
    // That enqueue woke the worker to learn the new due time; once it took the marker, the queue is clear.
    await pollUntil(
      () => redis.llen(s.keys.wake('fp.hold')),
      (n) => n === 0,
      'the wake marker to be taken',
    );
    await waitParked(redis, s.keys, 'fp.hold');
    const lane = await watchLane(redis, s.keys, 'fp.hold');
    const due = await producer.client.enqueue(HoldWorkflow, { key: 'due', hold: true });
    expect(await producer.client.get(due.id)).toMatchObject({ state: 'active', attempts: 1 });
    expect(await lane.writes()).toEqual([]);
    gates.open('due');
    expect(await due.result({ timeoutMs: 10_000 })).toEqual({ key: 'due', attempt: 1 });
    expect((await producer.client.get(later.id))?.state).toBe('delayed');
    expect(await redis.zscore(s.keys.workflow('fp.hold', 'delayed'), later.id)).not.toBeNull();
  });

  it('is not taken when the workflow cap is full', async () => {
    const s = space();
    await s.worker();
    const producer = await s.producer();
    expect(await redis.hget(s.keys.limits, 'wf:fp.capped')).toBe('1');
    await waitParked(redis, s.keys, 'fp.capped');
    const c1 = await producer.client.enqueue(CappedWorkflow, { key: 'cap-1', hold: true });
    expect((await producer.client.get(c1.id))?.state).toBe('active');
    await begun.get('cap-1').promise;
    // Everything but the cap invites the fast path: a parked worker, nothing waiting, no wake entry.
    await fakePark(redis, s.keys, 'fp.capped');
    expect(await dueInLane(redis, s.keys, 'fp.capped')).toBe(0);
    expect(await redis.llen(s.keys.wake('fp.capped'))).toBe(0);
    const c2 = await producer.client.enqueue(CappedWorkflow, { key: 'cap-2', hold: true });
    expect(await producer.client.get(c2.id)).toMatchObject({ state: 'waiting', attempts: 0 });
    expect(await redis.smembers(s.keys.workflow('fp.capped', 'active'))).toEqual([c1.id]);
    expect(await redis.zscore(s.keys.workflow('fp.capped', 'parked'), FAKE_WORKER)).not.toBeNull();
    gates.open('cap-1');
    await c1.result({ timeoutMs: 10_000 });
    gates.open('cap-2');
    expect(await c2.result({ timeoutMs: 10_000 })).toEqual({ key: 'cap-2', attempt: 1 });
  });

  it('hands over runs that complete, fail for good and retry (replaying the finished step)', async () => {
    const s = space();
    const app = await s.worker();
    const fastPathed = async (input: { key: string; mode: 'ok' | 'reject' | 'flaky' }) => {
      await waitParked(redis, s.keys, 'fp.outcome');
      const lane = await watchLane(redis, s.keys, 'fp.outcome');
      const h = await app.client.enqueue(OutcomeWorkflow, input);
      expect(await app.client.get(h.id)).toMatchObject({ state: 'active', attempts: 1 });
      expect(await lane.writes()).toEqual([]);
      gates.open(input.key);
      return h;
    };
    const ok = await fastPathed({ key: 'out-ok', mode: 'ok' });
    expect(await ok.result({ timeoutMs: 10_000 })).toEqual({ stepped: 1, attempt: 1 });
    const rejected = await fastPathed({ key: 'out-reject', mode: 'reject' });
    const error = await rejected.result({ timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    expect(error).toMatchObject({ causeName: 'NonRetryableError', causeMessage: 'out-reject rejected' });
    expect(await app.client.get(rejected.id)).toMatchObject({ state: 'failed', attempts: 1, failures: 1 });
    expect(counts.get(`${rejected.id}:run`)).toBe(1);
    const flaky = await fastPathed({ key: 'out-flaky', mode: 'flaky' });
    expect(await flaky.result({ timeoutMs: 10_000 })).toEqual({ stepped: 1, attempt: 2 });
    expect(await app.client.get(flaky.id)).toMatchObject({ state: 'completed', attempts: 2, failures: 1 });
    expect([counts.get(`${flaky.id}:run`), counts.get(`${flaky.id}:step`)]).toEqual([2, 1]);
  });

  it('a handoff nobody takes is taken by the next claim of its workflow', async () => {
    const s = space();
    await fakePark(redis, s.keys, 'fp.hold');
    const producer = await s.producer(); // default lockMs: the handoff's lease outlasts this test
    const input = { key: 'orphan-claimed' };
    const h = await producer.client.enqueue(HoldWorkflow, input);
    expect((await producer.client.get(h.id))?.state).toBe('active');
    expect(await redis.lrange(s.keys.wake('fp.hold'), 0, -1)).toEqual([await handoffEntry(redis, s.keys, h.id, input)]);
    await s.worker();
    expect(await h.result({ timeoutMs: 10_000 })).toEqual({ key: input.key, attempt: 1 });
    expect(counts.get(`${h.id}:run`)).toBe(1);
    expect(await s.raw(h.id, 'attempts', 'stalls')).toEqual(['1', '0']);
    expect(await redis.llen(s.keys.wake('fp.hold'))).toBe(0);
    expect(await redis.zcard(s.keys.leases)).toBe(0);
    expect(await redis.scard(s.keys.workflow('fp.hold', 'active'))).toBe(0);
  });

  it('a handoff nobody takes before its lease runs out is recovered by the stalled scan, and runs once', async () => {
    const s = space();
    await fakePark(redis, s.keys, 'fp.hold');
    const producer = await s.producer({ worker: { lockMs: 300 } }); // the handoff's lease is the enqueuer's lockMs
    const input = { key: 'orphan-stalled' };
    const h = await producer.client.enqueue(HoldWorkflow, input);
    expect(await redis.lrange(s.keys.wake('fp.hold'), 0, -1)).toEqual([await handoffEntry(redis, s.keys, h.id, input)]);
    const deadline = Number(await redis.zscore(s.keys.leases, h.id));
    await pollUntil(
      () => redisTimeMs(redis),
      (now) => now > deadline,
      'the handoff lease to run out',
    );
    await s.worker({ stalledIntervalMs: 100 });
    expect(await h.result({ timeoutMs: 10_000 })).toEqual({ key: input.key, attempt: 2 });
    expect(counts.get(`${h.id}:run`)).toBe(1);
    // Observed: recovered like a stalled run, so a run that never executed counts one stall and one attempt.
    expect(await s.raw(h.id, 'state', 'attempts', 'stalls')).toEqual(['completed', '2', '1']);
    await pollUntil(
      () => redis.llen(s.keys.wake('fp.hold')),
      (n) => n === 0,
      'an empty wake list',
    );
    expect(await redis.zcard(s.keys.leases)).toBe(0);
    expect(await redis.scard(s.keys.workflow('fp.hold', 'active'))).toBe(0);
  });

  it("a handed-over run keeps its lease while its worker runs it (a producer's shorter lockMs must not stall it)", async () => {
    const s = space();
    await s.worker({ stalledIntervalMs: 50 }); // lockMs 30 000: its first heartbeat is 10 s away
    const producer = await s.producer({ worker: { lockMs: 300 } });
    await waitParked(redis, s.keys, 'fp.hold');
    const h = await producer.client.enqueue(HoldWorkflow, { key: 'kept', hold: true });
    expect((await producer.client.get(h.id))?.state).toBe('active');
    await begun.get('kept').promise;
    // Wait for a stalled scan that ran after the enqueuer's lease deadline (the gate key lives 50 ms from the scan).
    // The worker moves the lease onto its own lockMs as soon as it takes the handoff, so read the
    // enqueuer's deadline from the start time the enqueue recorded.
    const [startedAt] = await s.raw(h.id, 'startedAt');
    const deadline = Number(startedAt) + 300;
    expect(Number(await redis.zscore(s.keys.leases, h.id))).toBeGreaterThan(deadline);
    await pollUntil(
      async () => {
        const [[, time], [, ttl]] = (await redis.multi().time().pttl(s.keys.stallGate).exec()) as [[null, string[]], [null, number]];
        return ttl > 0 ? Number(time[0]) * 1000 + Number(time[1]) / 1000 - (50 - ttl) : 0;
      },
      (scannedAt) => scannedAt > deadline + 10,
      'a stalled scan after the lease deadline',
    );
    // Never stalled: a lean record has no `stalls` until a stall counts one.
    expect(await s.raw(h.id, 'state', 'attempts', 'stalls')).toEqual(['active', '1', null]);
    gates.open('kept');
    expect(await h.result({ timeoutMs: 10_000 })).toEqual({ key: 'kept', attempt: 1 });
    expect(counts.get(`${h.id}:run`)).toBe(1);
  });

  it('stays on for an idle worker across its reserve calls: each one drops the announcement and, claiming nothing, makes it again', async () => {
    const s = space();
    const monitor = await monitorCommands(s.keys.namespace);
    try {
      // An idle worker reserves every 50 ms (its stalled scan), blocking in between.
      await s.worker({ stalledIntervalMs: 50 });
      await waitParked(redis, s.keys, 'fp.hold');
      const parkedKey = s.keys.workflow('fp.hold', 'parked');
      const script = (name: string) => (args: string[]) =>
        args[0] === 'fcall' && args[1].endsWith(`_${name}`) && args.includes(s.keys.base);
      const announced = (args: string[]) => args[0] === 'zadd' && args[1] === parkedKey;
      const events: string[] = [];
      for (let i = 0; i < 24; i++) {
        const args = await monitor.next((a) => script('reserve')(a) || script('park')(a) || announced(a));
        events.push(announced(args) ? 'announced' : args[1].replace(/.*_/, ''));
      }
      // reserve.lua removes the worker's park entry: a reserve after which nothing announces it
      // again left the worker blocking unannounced, its enqueues off the fast path (before, for
      // ~0.5 s each time). A reserve that comes up short announces it itself, no park call needed.
      const reserves = events.map((name, i) => (name === 'reserve' ? i : -1)).filter((i) => i >= 0);
      expect(reserves.length).toBeGreaterThan(3);
      for (const i of reserves.slice(0, -1)) expect(events[i + 1]).toBe('announced');
      expect(events).not.toContain('park');
    } finally {
      await monitor.close();
    }
  });

  it('stays on for a worker of concurrency 1: the complete call that frees its one slot announces it parked', async () => {
    const s = space();
    await s.worker({ concurrency: 1 });
    const producer = await s.producer();
    await waitParked(redis, s.keys, 'fp.hold');
    const lane = await watchLane(redis, s.keys, 'fp.hold');
    // Each enqueue follows the previous result: with the park left to a call after the complete
    // one, an enqueue could land between the two and queue the run instead (a race; here there is
    // none: the complete call that publishes the result has parked the worker already).
    for (let i = 0; i < 20; i++) {
      const h = await producer.client.enqueue(HoldWorkflow, { key: `c1-${i}` });
      expect(await h.result({ timeoutMs: 10_000 })).toEqual({ key: `c1-${i}`, attempt: 1 });
    }
    expect(await lane.writes()).toEqual([]); // not one of the 20 was queued as due
  });

  it('a run enqueued while a handoff is pending does not wait for the block timeout', async () => {
    const s = space();
    const app = await s.worker(); // block timeout: 5 s; 4 slots stay free while burst-1 runs
    await waitParked(redis, s.keys, 'fp.hold');
    // Two enqueues land before the worker's next BLPOP (here: one transaction; in production: two producers).
    const scripts = scriptsOn(redis);
    const multi = redis.multi();
    for (const key of ['burst-1', 'burst-2']) {
      scripts.queue(
        multi,
        'enqueue',
        enqueueKeys(s.keys, key),
        enqueueArgs(s.keys, 'fp.hold', key, { key, hold: key === 'burst-1' }, true),
      );
    }
    // The handed-over run's reply names its lease token and the worker (see lua/enqueue.lua).
    expect(((await multi.exec()) ?? []).map(([, reply]) => reply)).toEqual([expect.stringMatching(/^\+active \d+ \S+$/), '+waiting']);
    await begun.get('burst-1').promise;
    expect(await app.client.wait('burst-2', { timeoutMs: 2_000 })).toEqual({ key: 'burst-2', attempt: 1 });
  });
});

/**
 * When the fast path is not taken, a lone enqueue wakes a worker only if its run is the first in
 * its lane's list: a run queued behind others is served by the marker the first one left, or by
 * the worker that took that marker, which claims it too or passes the marker on when its batch is
 * full (enqueuePlain in lua/includes/enqueue.lua; claimRuns in claim-pass.lua).
 */
describe('wakes of runs queued behind others', () => {
  it('only the first run of an empty lane leaves a wake marker', async () => {
    const s = space();
    const producer = await s.producer();
    const wake = s.keys.wake('fp.hold');
    const queue = s.keys.lane('fp.hold', undefined, 'queue');
    await producer.client.enqueue(HoldWorkflow, { key: 'first' });
    expect(await redis.lrange(wake, 0, -1)).toEqual(['1']);
    // As if a worker had taken the marker and its claim were still on its way.
    await redis.del(wake);
    await producer.client.enqueue(HoldWorkflow, { key: 'second' });
    expect(await redis.llen(queue)).toBe(2);
    expect(await redis.exists(wake)).toBe(0);
    // Once the lane is empty again, the next run wakes a worker.
    await redis.del(queue);
    await producer.client.enqueue(HoldWorkflow, { key: 'third' });
    expect(await redis.lrange(wake, 0, -1)).toEqual(['1']);
  });

  it('a run queued behind one a worker is about to claim still reaches an idle worker at once', async () => {
    const s = space();
    // Two workers of one slot each, both blocked on the wake list; no fast path, so both runs are queued.
    await s.worker({ concurrency: 1 });
    await s.worker({ concurrency: 1 });
    const producer = await s.producer({ fastPath: false });
    // In one write: the first run's marker wakes a worker, whose claim comes after the second
    // run's enqueue, which finds the lane's list not empty and leaves no marker of its own.
    const [first, second] = await Promise.all([
      producer.client.enqueue(HoldWorkflow, { key: 'queued-a', hold: true }),
      producer.client.enqueue(HoldWorkflow, { key: 'queued-b', hold: true }),
    ]);
    // Both run at once, one on each worker: the first worker's claim, its one slot full with runs
    // still due, passed the marker on. Neither finishes before both began, and the second begins
    // well before the idle worker's block would time out and its reserve find the run anyway.
    let timer: NodeJS.Timeout | undefined;
    const blockTimedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('the second run waited for a block timeout: no worker was woken')), MAX_BLOCK_MS / 2);
    });
    const bothBegun = Promise.all([begun.get('queued-a').promise, begun.get('queued-b').promise]);
    await Promise.race([bothBegun, blockTimedOut]).finally(() => clearTimeout(timer));
    gates.open('queued-a');
    gates.open('queued-b');
    expect(await first.result({ timeoutMs: 10_000 })).toEqual({ key: 'queued-a', attempt: 1 });
    expect(await second.result({ timeoutMs: 10_000 })).toEqual({ key: 'queued-b', attempt: 1 });
  });
});
