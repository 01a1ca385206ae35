import { newCallId } from '../../lib/redis/commands/call-id';
import type Redis from 'ioredis';
import { setTimeout as delay } from 'node:timers/promises';
import { RunContext, RunEvents, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { parseCompleteReply } from '../../lib/redis/commands/complete.command';
import { parseReserveReply } from '../../lib/redis/commands/reserve.command';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { listenToChannels } from '../support/pubsub';
import { scriptsOn } from '../support/scripts';
import { enqueueArgs, enqueueKeys, firstToken, sampleActive } from '../support/queue-state';
import { commandsBefore, deferred, monitorCommands, pollUntil } from '../support/workflows';

/**
 * What batching the worker's commits could break silently: one `complete` / `save-steps` call
 * carries many runs (each token-checked on its own), and `complete` refills the freed slots.
 */
const live = { now: 0, max: 0 };
async function work<T>(value: T, ms: number): Promise<T> {
  live.now++;
  live.max = Math.max(live.max, live.now);
  try {
    await delay(ms); // the work itself, not a synchronisation
  } finally {
    live.now--;
  }
  return value;
}

@Workflow('batch.capped', { concurrency: 5 })
class CappedWorkflow {
  run(input: { i: number }) {
    return work(input.i, 1 + (input.i % 3));
  }
}

@Workflow('batch.local', { attempts: 2, backoff: { delayMs: 0 } })
class LocalWorkflow {
  async run(input: { i: number }, ctx: RunContext) {
    const value = await work(input.i, 1 + (input.i % 4));
    if (input.i % 10 === 0 && ctx.attempt === 1) throw new Error('fails once: frees its slot without a refill');
    return value;
  }
}

const starts: string[] = [];
@Workflow('batch.a')
class AWorkflow {
  run(input: { i: number }) {
    starts.push(`a${input.i}`);
    return input.i;
  }
}
@Workflow('batch.b')
class BWorkflow {
  run(input: { i: number }) {
    starts.push(`b${input.i}`);
    return input.i;
  }
}

@Workflow('batch.instant')
class InstantWorkflow {
  run(input: { i: number }) {
    return input.i;
  }
}

let redis: Redis;
let apps: TestApp[] = [];
const namespaces: string[] = [];
beforeAll(() => {
  redis = rawRedis();
});
beforeEach(() => {
  live.now = live.max = 0;
});
afterEach(async () => {
  await Promise.all(apps.map((app) => app.close()));
  apps = [];
});
afterAll(async () => {
  for (const ns of namespaces) await dropNamespace(redis, ns);
  await redis.quit();
});

async function app(
  ns: string,
  providers: Parameters<typeof createApp>[0],
  worker: { enabled?: boolean; concurrency?: number },
): Promise<TestApp> {
  const created = await createApp(providers, { namespace: ns, worker });
  apps.push(created);
  return created;
}

function namespace(): { ns: string; keys: RedisKeys } {
  const ns = uniqueNamespace('batch');
  namespaces.push(ns);
  return { ns, keys: new RedisKeys('sluice', ns) };
}

describe('batched commits, script level', () => {
  it('one reserve reply stays bounded: claiming stops once the memos shipped pass 8 MiB, and the wake is passed on', async () => {
    const { keys } = namespace();
    const WF = 'batch.big-memo';
    const scripts = scriptsOn(redis);
    const ids = ['b1', 'b2', 'b3', 'b4'];
    for (const id of ids) await scripts.run('enqueue', enqueueKeys(keys, id), enqueueArgs(keys, WF, id, {}, false));
    const reserve = async (n: number) =>
      parseReserveReply(
        await scripts.run<unknown[]>(
          'reserve',
          [keys.stallGate, keys.call(newCallId())],
          [keys.base, n, 30_000, 0, 3, 256, 60_000, 'w', 0, 0, WF],
        ),
      ).claims;
    // A first attempt of each, which persists a 3 MiB step and is handed back: its retry ships the memo.
    const big = JSON.stringify('x'.repeat(3 * 1024 * 1024));
    for (const claim of await reserve(4)) {
      expect(await scripts.run('save-steps', [keys.leases], [keys.base, claim.id, claim.token, 'big#1', big])).toEqual([1]);
      await scripts.run('release', [keys.run(claim.id), keys.leases, keys.limits, keys.seq], [keys.base, claim.id, claim.token]);
    }
    await redis.del(keys.wake(WF));
    const claims = await reserve(64);
    // 3 + 3 MiB is under the budget, the third claim takes the reply past it: no fourth.
    expect(claims).toHaveLength(3);
    expect(claims.every((claim) => claim.steps.get('big#1') === big)).toBe(true);
    expect(await redis.lrange(keys.wake(WF), -1, -1)).toEqual(['1']);
  });

  it('a worker holding a token of an expired run cannot write to a new run that reuses the id', async () => {
    const { keys } = namespace();
    const WF = 'batch.reuse';
    const scripts = scriptsOn(redis);
    const reserve = async () =>
      parseReserveReply(
        await scripts.run<unknown[]>(
          'reserve',
          [keys.stallGate, keys.call(newCallId())],
          [keys.base, 1, 30_000, 0, 3, 256, 60_000, 'w', 0, 0, WF],
        ),
      ).claims[0];
    await scripts.run('enqueue', enqueueKeys(keys, 'x'), enqueueArgs(keys, WF, 'x', {}, false));
    const old = await reserve();
    await scripts.run(
      'complete',
      [keys.call(newCallId())],
      [keys.base, 60_000, 0, 30_000, 0, '', 0, '', 1, WF, 0, 'x', old.token, '"first"', ''],
    );
    await redis.del(keys.run('x')); // its retention ran out
    await redis.set(`${keys.base}clock-tick`, '1', 'PX', 5); // let the Redis clock move on a millisecond at least
    await pollUntil(
      () => redis.exists(`${keys.base}clock-tick`),
      (n) => n === 0,
      'a millisecond to pass',
    );
    await scripts.run('enqueue', enqueueKeys(keys, 'x'), enqueueArgs(keys, WF, 'x', {}, false));
    const fresh = await reserve();
    expect(fresh.token).not.toBe(old.token);
    expect(await scripts.run('save-steps', [keys.leases], [keys.base, 'x', old.token, 's#1', '"stale"'])).toEqual([0]);
    expect(await redis.hget(keys.run('x'), 'step:s#1')).toBeNull();
  });

  it('steps that ride along with completions are token-checked one by one, like the completions', async () => {
    const { keys } = namespace();
    const WF = 'batch.mixed';
    const scripts = scriptsOn(redis);
    for (const id of ['m1', 'm2', 'm3']) await scripts.run('enqueue', enqueueKeys(keys, id), enqueueArgs(keys, WF, id, { id }, false));
    const claimed = parseReserveReply(
      await scripts.run<unknown[]>(
        'reserve',
        [keys.stallGate, keys.call(newCallId())],
        [keys.base, 3, 30_000, 0, 3, 256, 60_000, 'w', 0, 0, WF],
      ),
    );
    const token = Object.fromEntries(claimed.claims.map((c) => [c.id, c.token]));
    await redis.hincrby(keys.run('m2'), 'token', 1); // m2 was taken over: its step must not land
    const reply = parseCompleteReply(
      await scripts.run<unknown[]>(
        'complete',
        [keys.call(newCallId())],
        [
          keys.base,
          60_000,
          0,
          30_000,
          0,
          '',
          0,
          '',
          1,
          WF,
          2,
          'm1',
          token.m1,
          'a#1',
          '"one"',
          'm2',
          token.m2,
          'a#1',
          '"two"',
          'm3',
          token.m3,
          '"done"',
          '',
        ],
      ),
    );
    expect(reply).toMatchObject({ completed: [true], saved: [true, false], parked: false });
    expect(await redis.hmget(keys.run('m1'), 'state', 'step:a#1')).toEqual(['active', '"one"']);
    expect(await redis.hmget(keys.run('m2'), 'state', 'step:a#1')).toEqual(['active', null]);
    expect(await redis.hmget(keys.run('m3'), 'state', 'result')).toEqual(['completed', '"done"']);
  });

  it('a claim pops a lane many runs at once and puts back, in order, the ones it did not claim', async () => {
    const { keys } = namespace();
    const scripts = scriptsOn(redis);
    await redis.hset(keys.limits, 'wf:batch.pop-b', '2'); // b's cap stops its claims after 2 of the 5 popped
    for (const wf of ['batch.pop-a', 'batch.pop-b'])
      for (let i = 1; i <= 5; i++) {
        const id = `${wf.slice(-1)}${i}`;
        await scripts.run('enqueue', enqueueKeys(keys, id), enqueueArgs(keys, wf, id, { i }, false, 30_000, true));
      }
    const reserved = parseReserveReply(
      await scripts.run<unknown[]>(
        'reserve',
        [keys.stallGate, keys.call(newCallId())],
        [keys.base, 6, 30_000, 0, 3, 256, 60_000, 'w', 0, 0, 'batch.pop-a', 'batch.pop-b'],
      ),
    );
    // Round-robin over the two workflows; b stops at its cap, a fills the rest.
    expect(reserved.claims.map((c) => c.id)).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'a4']);
    expect(await redis.lrange(keys.lane('batch.pop-a', undefined, 'queue'), 0, -1)).toEqual(['a5']);
    expect(await redis.lrange(keys.lane('batch.pop-b', undefined, 'queue'), 0, -1)).toEqual(['b3', 'b4', 'b5']);
    for (const id of ['a5', 'b3', 'b4', 'b5']) expect(await redis.hget(keys.run(id), 'state')).toBe('waiting');
  });

  it('a claim pops each group lane ahead for its share, within its cap, and puts back the rest in order', async () => {
    const { keys } = namespace();
    const scripts = scriptsOn(redis);
    const WF = 'batch.pop-groups';
    // The workflow's cap of 3 stops the pass before g2's share is used up.
    await redis.hset(keys.limits, `wf:${WF}`, '3', `wf:${WF}:g:g1`, '2', `wf:${WF}:overrides`, '1'); // a group override, counted
    for (const group of ['g1', 'g2'])
      for (let i = 1; i <= 5; i++) {
        const id = `${group}-${i}`;
        await scripts.run('enqueue', enqueueKeys(keys, id), enqueueArgs(keys, WF, id, { i }, false, 30_000, true, { group }));
      }
    const reserved = parseReserveReply(
      await scripts.run<unknown[]>(
        'reserve',
        [keys.stallGate, keys.call(newCallId())],
        [keys.base, 6, 30_000, 0, 3, 256, 60_000, 'w', 0, 0, WF],
      ),
    );
    // Round-robin over the groups: g1 popped 2 ahead (its cap), g2 3 (its share of 6), and the
    // workflow's cap stopped the pass after 3 claims.
    expect(reserved.claims.map((c) => c.id)).toEqual(['g1-1', 'g2-1', 'g1-2']);
    expect(await redis.lrange(keys.lane(WF, 'g1', 'queue'), 0, -1)).toEqual(['g1-3', 'g1-4', 'g1-5']);
    expect(await redis.lrange(keys.lane(WF, 'g2', 'queue'), 0, -1)).toEqual(['g2-2', 'g2-3', 'g2-4', 'g2-5']);
    for (const id of ['g2-2', 'g2-3']) expect(await redis.hget(keys.run(id), 'state')).toBe('waiting');
    // g1 is full, so it left the round-robin; g2 still has a due run and room.
    expect(await redis.zrange(keys.workflow(WF, 'ready'), 0, -1)).toEqual(['g2']);
  });

  it('a stale token in the middle of a batch changes nothing for that run and nothing else', async () => {
    const { keys } = namespace();
    const WF = 'batch.raw';
    const scripts = scriptsOn(redis);
    await redis.hset(keys.limits, `wf:${WF}`, '3');
    const ids = ['r1', 'r2', 'r3', 'r4', 'r5', 'r6'];
    for (const id of ids)
      expect(await scripts.run('enqueue', enqueueKeys(keys, id), enqueueArgs(keys, WF, id, { id }, false, 30_000, true))).toBe('+waiting');
    const reserved = parseReserveReply(
      await scripts.run<unknown[]>(
        'reserve',
        [keys.stallGate, keys.call(newCallId())],
        [keys.base, 6, 30_000, 0, 3, 256, 60_000, 'w', 0, 0, WF],
      ),
    );
    const createdAt = async (id: string) => (await redis.hget(keys.run(id), 'createdAt'))!;
    const first = async (ids: string[]) => Promise.all(ids.map(async (id) => [id, firstToken(await createdAt(id)), 1]));
    expect(reserved.claims.map((c) => [c.id, c.token, c.attempt])).toEqual(await first(['r1', 'r2', 'r3']));
    const token = Object.fromEntries(reserved.claims.map((c) => [c.id, c.token]));
    await redis.hincrby(keys.run('r2'), 'token', 1); // another worker took r2 over

    const saved = await scripts.run<number[]>(
      'save-steps',
      [keys.leases],
      [keys.base, 'r1', token.r1, 's#1', '"a"', 'r2', token.r2, 's#1', '"b"', 'r3', token.r3, 's#1', '"c"'],
    );
    expect(saved).toEqual([1, 0, 1]);
    /** A run's step memo: the `step:<name>#<n>` fields of its record. */
    const steps = async (id: string) =>
      Object.fromEntries(
        Object.entries(await redis.hgetall(keys.run(id)))
          .filter(([field]) => field.startsWith('step:') && !field.startsWith('step:@'))
          .map(([field, value]) => [field.slice(5), value]),
      );
    expect([await steps('r1'), await steps('r2'), await steps('r3')]).toEqual([{ 's#1': '"a"' }, {}, { 's#1': '"c"' }]);

    // Every done channel of the namespace (a pattern; on a cluster, each run's: see listenToChannels).
    const listener = await listenToChannels(
      redis,
      `${keys.base}done:*`,
      ids.map((id) => keys.done(id)),
    );
    const completed = parseCompleteReply(
      await scripts.run<unknown[]>(
        'complete',
        [keys.call(newCallId())],
        [
          keys.base,
          60_000,
          3,
          30_000,
          0,
          '',
          0,
          '',
          1,
          WF,
          0,
          'r1',
          token.r1,
          '"done-1"',
          '',
          'r2',
          token.r2,
          '"done-2"',
          '',
          'r3',
          token.r3,
          '"done-3"',
          '',
        ],
      ),
    );
    await listener.close(); // every publish of that call has arrived
    const announced = listener.heard.map((channel) => channel.slice(keys.base.length));
    expect(completed).toMatchObject({ completed: [true, false, true], saved: [], parked: false });
    expect(announced.sort()).toEqual(['done:r1', 'done:r3']);
    for (const id of ['r1', 'r3']) {
      expect(await redis.hmget(keys.run(id), 'state', 'result')).toEqual(['completed', `"done-${id.slice(1)}"`]);
      // The step memo lives in the record: its retention started with the result's.
      expect(await steps(id)).toEqual({ 's#1': id === 'r1' ? '"a"' : '"c"' });
      expect(await redis.pttl(keys.run(id))).toBeGreaterThan(0);
    }
    expect(await redis.hmget(keys.run('r2'), 'state', 'token', 'result', 'finishedAt')).toEqual([
      'active',
      String(BigInt(token.r2) + 1n),
      null,
      null,
    ]);
    expect(await redis.pttl(keys.run('r2'))).toBe(-1);
    expect(await redis.zscore(keys.leases, 'r2')).not.toBeNull();
    // The refill: r2 still holds its slot, so the cap of 3 leaves room for two of the three waiting runs.
    expect(completed.claims.map((c) => [c.id, c.token, c.attempt])).toEqual(await first(['r4', 'r5']));
    expect((await redis.smembers(keys.workflow(WF, 'active'))).sort()).toEqual(['r2', 'r4', 'r5']);
    expect((await redis.zrange(keys.leases, 0, -1)).sort()).toEqual(['r2', 'r4', 'r5']);
    expect(await redis.lrange(keys.lane(WF, undefined, 'queue'), 0, -1)).toEqual(['r6']);
    expect(await redis.zcard(keys.lane(WF, undefined, 'waiting'))).toBe(0);
  });
});

describe('batched commits, one worker app', () => {
  it('a workflow cap of 5 holds under worker concurrency 50, and every completion is reported once', async () => {
    const { ns, keys } = namespace();
    const worker = await app(ns, [CappedWorkflow], { concurrency: 50 });
    const completed: string[] = [];
    const all = deferred();
    worker.app.get(RunEvents).on('completed', (event) => {
      completed.push(event.runId);
      if (completed.length === 300) all.resolve();
    });
    const sampler = sampleActive(redis, keys.workflow('batch.capped', 'active'));
    const handles = await worker.client.enqueueMany(
      CappedWorkflow,
      Array.from({ length: 300 }, (_, i) => ({ input: { i } })),
    );
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));
    await all.promise;
    const sampled = await sampler.stop();
    await worker.close(); // drains: a duplicate completion would have been reported by now
    apps = [];

    expect(results).toEqual(handles.map((_, i) => i));
    expect(live.max).toBeLessThanOrEqual(5);
    expect(sampled.max).toBeLessThanOrEqual(5);
    expect([live.max, sampled.max]).toEqual([5, 5]); // the cap was reached, so a breach could show
    expect(sampled.count).toBeGreaterThan(10);
    expect(completed).toHaveLength(300);
    expect(new Set(completed)).toEqual(new Set(handles.map((h) => h.id)));
  });

  it('refills never run more than the worker concurrency at once', async () => {
    const { ns } = namespace();
    const worker = await app(ns, [LocalWorkflow], { concurrency: 3 });
    const upfront = await worker.client.enqueueMany(
      LocalWorkflow,
      Array.from({ length: 50 }, (_, i) => ({ input: { i } })),
    );
    // The rest arrive one by one while the worker drains: handoffs, wakes and refills interleave.
    const trickled = await Promise.all(Array.from({ length: 50 }, (_, i) => worker.client.enqueue(LocalWorkflow, { i: 50 + i })));
    const handles = [...upfront, ...trickled];
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));
    expect(results).toEqual(handles.map((_, i) => i));
    expect(live.max).toBeLessThanOrEqual(3);
    expect(live.max).toBe(3);
  });

  it("a worker of 1 learning from its first run that its runs are short claims the runs to hold in that run's complete call", async () => {
    const { ns, keys } = namespace();
    const producer = await app(ns, [InstantWorkflow], { enabled: false });
    const enqueue = (count: number) =>
      producer.client.enqueueMany(
        InstantWorkflow,
        Array.from({ length: count }, (_, i) => ({ input: { i } })),
      );
    // A worker app first, so that the measured worker's first run is not slowed by code run for
    // the first time in this process: it learns from that run how long runs are.
    const warmUp = await app(ns, [InstantWorkflow], { concurrency: 1 });
    await Promise.all((await enqueue(50)).map((h) => h.result({ timeoutMs: 30_000 })));
    await warmUp.close();
    const handles = await enqueue(200);
    const monitor = await monitorCommands(ns);
    try {
      await app(ns, [InstantWorkflow], { concurrency: 1 });
      await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));
      const seen = await commandsBefore(monitor, redis, `${keys.base}sentinel`);
      // The namespace's script calls, each with what it claimed (its lease entries).
      const calls: Array<{ script: string; claimed: number }> = [];
      for (const args of seen) {
        if (args[0] === 'fcall') {
          const ours = args.slice(3).some((arg) => arg.startsWith(keys.base));
          // The boot's first reserve goes through the at-layout variant (see LuaScripts.atLayout).
          calls.push({ script: ours ? args[1].replace(/^sluice_[0-9a-f]+_|_at_layout$/g, '') : 'other', claimed: 0 });
        } else if (args[0] === 'zadd' && args[1] === keys.leases && calls.length > 0) {
          calls[calls.length - 1].claimed += (args.length - 2) / 2;
        }
      }
      // Its claiming calls (the boot's declarations left out).
      const ours = calls.filter((call) => call.script === 'reserve' || call.script === 'complete');
      const firstComplete = ours.findIndex((call) => call.script === 'complete');
      // One reserve claims the first run; no reserve of its own for the slots learnt: the first
      // run's complete call, which carries every run the worker holds, claims for them.
      expect(ours.slice(0, firstComplete).map((call) => call.script)).toEqual(['reserve']);
      expect(ours[0].claimed).toBe(1);
      expect(ours[firstComplete].claimed).toBeGreaterThan(1);
    } finally {
      await monitor.close();
    }
  });

  it('one worker serves its workflows round-robin, not one backlog after the other', async () => {
    const { ns } = namespace();
    starts.length = 0;
    const producer = await app(ns, [AWorkflow, BWorkflow], { enabled: false });
    const a = await producer.client.enqueueMany(
      AWorkflow,
      Array.from({ length: 20 }, (_, i) => ({ input: { i } })),
    );
    const b = await producer.client.enqueueMany(
      BWorkflow,
      Array.from({ length: 20 }, (_, i) => ({ input: { i } })),
    );
    await app(ns, [AWorkflow, BWorkflow], { concurrency: 1 });
    await Promise.all([...a, ...b].map((h) => h.result({ timeoutMs: 30_000 })));

    expect(starts).toHaveLength(40);
    expect(starts.indexOf('b0')).toBeLessThan(starts.indexOf('a4'));
    // While both have a backlog, each gets about half of the starts (strict alternation: 10 and 10).
    const first20 = starts.slice(0, 20);
    const share = { a: first20.filter((s) => s.startsWith('a')).length, b: first20.filter((s) => s.startsWith('b')).length };
    expect(share.a).toBeGreaterThanOrEqual(5);
    expect(share.b).toBeGreaterThanOrEqual(5);
  });
});
