import type Redis from 'ioredis';
import { InvalidOptionError, RateLimit, UnknownWorkflowError, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { newCallId } from '../../lib/redis/commands/call-id';
import { parseCompleteReply } from '../../lib/redis/commands/complete.command';
import { parseReserveReply } from '../../lib/redis/commands/reserve.command';
import { auditNamespace, expectConsistent } from '../support/audit';
import { enqueueArgs, enqueueKeys } from '../support/queue-state';
import { scriptsOn } from '../support/scripts';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';

/**
 * Rate limits, fleet-wide and enforced in the claim script: at most `max` starts in any window of
 * `perMs` (Redis time), per workflow and per group (a default and overrides), changeable at
 * runtime, respected by the enqueue fast path. Over three processes, and the absence of a busy
 * poll: test/chaos/run-control.spec.ts.
 */
@Workflow('rl.flat', { rateLimit: { max: 4, perMs: 400 } })
class Flat {
  run(input: { i: number }) {
    return input.i;
  }
}

@Workflow('rl.grouped', { groupRateLimit: { max: 2, perMs: 300 } })
class Grouped {
  run(input: { i: number }) {
    return input.i;
  }
}

@Workflow('rl.slow', { rateLimit: { max: 2, perMs: 3_600_000 } })
class Slow {
  run(input: { i: number }) {
    return input.i;
  }
}

/** Claim times (Redis clock) of runs, read from their records, sorted. */
async function startTimes(redis: Redis, base: string, ids: string[]): Promise<number[]> {
  const pipeline = redis.pipeline();
  for (const id of ids) pipeline.hget(`${base}run:${id}`, 'startedAt');
  const rows = (await pipeline.exec()) ?? [];
  return rows.map(([, value]) => Number(value)).sort((a, b) => a - b);
}

/** The sliding-window property: the (max+1)-th start after any start is at least a window later. */
function expectWithinRate(times: number[], rate: RateLimit): void {
  const tooClose = times.filter((t, i) => i + rate.max < times.length && times[i + rate.max] - t < rate.perMs);
  expect(tooClose).toEqual([]);
}

describe('rate limits', () => {
  const ns = uniqueNamespace('rl');
  const base = `{sluice:${ns}}:`;
  let redis: Redis;
  let app: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    app = await createApp([Flat, Grouped, Slow], { namespace: ns, worker: { concurrency: 16 } });
  });
  afterAll(async () => {
    await app.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('a workflow limit holds in every window while a backlog drains; stats and getLimits show it', async () => {
    const handles = await app.client.enqueueMany(
      Flat,
      Array.from({ length: 14 }, (_, i) => ({ input: { i } })),
    );
    await Promise.all(handles.map((h) => h.result({ timeoutMs: 20_000 })));
    const times = await startTimes(
      redis,
      base,
      handles.map((h) => h.id),
    );
    expectWithinRate(times, { max: 4, perMs: 400 });
    // 14 starts at 4 per 400 ms cannot take less than three full windows.
    expect(times[times.length - 1] - times[0]).toBeGreaterThanOrEqual(3 * 400);
    expect((await app.client.stats({ workflow: Flat })).workflows['rl.flat'].rateLimit).toEqual({ max: 4, perMs: 400 });
    expect(await app.client.getLimits({ workflow: 'rl.flat' })).toEqual(
      expect.objectContaining({ rateLimit: { max: 4, perMs: 400 }, groupRateLimit: null }),
    );
  });

  it('each group has its own window (default and override); another group is not held by a busy one', async () => {
    expect(await app.client.setLimits({ workflow: 'rl.grouped', group: 'big', rateLimit: { max: 5, perMs: 300 } })).toBeNull();
    const enqueue = (group: string, n: number) =>
      app.client.enqueueMany(
        Grouped,
        Array.from({ length: n }, (_, i) => ({ input: { i }, opts: { group } })),
      );
    const [a, big] = [await enqueue('a', 8), await enqueue('big', 12)];
    await Promise.all([...a, ...big].map((h) => h.result({ timeoutMs: 20_000 })));
    expectWithinRate(
      await startTimes(
        redis,
        base,
        a.map((h) => h.id),
      ),
      { max: 2, perMs: 300 },
    );
    expectWithinRate(
      await startTimes(
        redis,
        base,
        big.map((h) => h.id),
      ),
      { max: 5, perMs: 300 },
    );
    expect(await app.client.getLimits({ workflow: 'rl.grouped', group: 'big' })).toEqual(
      expect.objectContaining({
        groupRateLimit: { max: 2, perMs: 300 },
        groupRateOverride: { max: 5, perMs: 300 },
        groupRate: { max: 5, perMs: 300 },
      }),
    );
    // The groups held back wait in rate-held until their window frees; at rest nothing is left there.
    expect(await redis.zcard(`${base}wf:rl.grouped:rate-held`)).toBe(0);
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });

  it('the fast path respects the limit; removing the limit at runtime releases what it held', async () => {
    const first = await Promise.all([0, 1].map((i) => app.client.enqueue(Slow, { i })));
    await Promise.all(first.map((h) => h.result({ timeoutMs: 10_000 })));
    // The window of an hour is full: an idle, parked worker does not get this one.
    const third = await app.client.enqueue(Slow, { i: 2 });
    expect((await app.client.get(third.id))?.state).toBe('waiting');
    expect(await app.client.setLimits({ workflow: 'rl.slow', rateLimit: null })).toEqual({ max: 2, perMs: 3_600_000 });
    await expect(third.result({ timeoutMs: 10_000 })).resolves.toBe(2);
  });

  it("groups held for a long window are released when every group's limit changes at runtime", async () => {
    await app.client.setLimits({ workflow: 'rl.grouped', group: '*', rateLimit: { max: 1, perMs: 3_600_000 } });
    const handles = await app.client.enqueueMany(
      Grouped,
      [0, 1, 2].map((i) => ({ input: { i }, opts: { group: 'slowpoke' } })),
    );
    await handles[0].result({ timeoutMs: 10_000 });
    expect((await app.client.get(handles[2].id))?.state).toBe('waiting');
    expect(await redis.zscore(`${base}wf:rl.grouped:rate-held`, 'slowpoke')).not.toBeNull();
    // Shown per group: the limit that holds it, and until when it holds its due run back.
    const held = (await app.client.stats({ workflow: Grouped, groups: true })).workflows['rl.grouped'].groups!.slowpoke;
    expect(held).toMatchObject({ waiting: 2, rateLimit: { max: 1, perMs: 3_600_000 } });
    expect(held.rateHeldUntil!.getTime()).toBeGreaterThan(Date.now() + 3_000_000);
    expect(await app.client.setLimits({ workflow: 'rl.grouped', group: '*', rateLimit: { max: 2, perMs: 300 } })).toEqual({
      max: 1,
      perMs: 3_600_000,
    });
    // Back to 2 per 300 ms: the rest run now, not in an hour.
    await expect(Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })))).resolves.toEqual([0, 1, 2]);
  });

  it('bad input: typed errors, nothing written', async () => {
    const client = app.client;
    const before = await redis.hgetall(`${base}limits`);
    const bad: unknown[] = [
      { max: 0, perMs: 1000 },
      { max: 1.5, perMs: 1000 },
      { max: 10, perMs: 0 },
      { max: 10 },
      { perMs: 10 },
      'fast',
      [],
    ];
    for (const rateLimit of bad) {
      await expect(client.setLimits({ workflow: 'rl.flat', rateLimit: rateLimit as RateLimit })).rejects.toBeInstanceOf(InvalidOptionError);
    }
    await expect(client.setLimits({ rateLimit: { max: 1, perMs: 1 } })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(client.setLimits({ workflow: 'rl.flat', limit: 3, rateLimit: { max: 1, perMs: 1 } } as never)).rejects.toBeInstanceOf(
      InvalidOptionError,
    );
    // A typo names no workflow of the fleet: refused, and the namespace's controls stay off for it.
    await expect(client.setLimits({ workflow: 'rl.typo', rateLimit: { max: 1, perMs: 1000 } })).rejects.toBeInstanceOf(
      UnknownWorkflowError,
    );
    expect(await redis.hgetall(`${base}limits`)).toEqual(before);
    expect(() => Workflow('rl.bad', { rateLimit: { max: -1, perMs: 10 } })).toThrow(InvalidOptionError);
    expect(() => Workflow('rl.bad', { groupRateLimit: { max: 1, perMs: 2 ** 31 } })).toThrow(InvalidOptionError);
  });
});

@Workflow('rl.single', { rateLimit: { max: 3, perMs: 300 } })
class Single {
  run(input: { i: number }) {
    return input.i;
  }
}

@Workflow('rl.single-grouped', { groupRateLimit: { max: 3, perMs: 300 } })
class SingleGrouped {
  run(input: { i: number }) {
    return input.i;
  }
}

/**
 * A worker whose every slot is busy refills the slot in its complete call and, when that comes up
 * short, is announced parked and blocks on its wake lists. A rate limit's window freeing is no
 * wake, so a refill the limit held back must not park the worker (script level below): it
 * reserves, and the reserve says when the window frees. Here, the pace that results.
 */
describe('rate limits, a worker of concurrency 1', () => {
  const ns = uniqueNamespace('rl-one');
  const base = `{sluice:${ns}}:`;
  let redis: Redis;
  let app: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    app = await createApp([Single, SingleGrouped], { namespace: ns, worker: { concurrency: 1 } });
  });
  afterAll(async () => {
    await app.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  it.each([
    ['a workflow limit', Single, undefined],
    ['a group limit', SingleGrouped, 'tenant'],
  ])('%s: the worker claims again when each window frees, not a whole block later', async (_, workflow, group) => {
    const handles = await app.client.enqueueMany(
      workflow,
      Array.from({ length: 12 }, (_, i) => ({ input: { i }, opts: { group } })),
    );
    await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));
    const times = await startTimes(
      redis,
      base,
      handles.map((h) => h.id),
    );
    expectWithinRate(times, { max: 3, perMs: 300 });
    // Each window's starts follow its freeing closely: no gap near the 5 s a parked worker blocks.
    const gaps = times.slice(1).map((t, i) => t - times[i]);
    expect(Math.max(...gaps)).toBeLessThan(2_000);
  });
});

describe('rate limits, the complete call (script level)', () => {
  const ns = uniqueNamespace('rl-park');
  const keys = new RedisKeys('sluice', ns);
  let redis: Redis;
  let producer: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    producer = await createApp([Single], { namespace: ns, worker: { enabled: false } });
  });
  afterAll(async () => {
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  /** Claims `id` with a reserve, then completes it asking to refill one slot and to be announced parked if short. */
  async function completeAndRefill(id: string): Promise<{ parked: boolean; claims: number }> {
    const scripts = scriptsOn(redis);
    const reserved = parseReserveReply(
      await scripts.run<unknown[]>(
        'reserve',
        [keys.stallGate, keys.call(newCallId())],
        [keys.base, 1, 30_000, 0, 3, 256, 60_000, 'w', 0, 0, 'rl.single'],
      ),
    );
    expect(reserved.claims.map((claim) => claim.id)).toEqual([id]);
    const reply = parseCompleteReply(
      await scripts.run<unknown[]>(
        'complete',
        [keys.call(newCallId())],
        [keys.base, 60_000, 1, 30_000, 0, 'w:30000', 5_000, '', 1, 'rl.single', 0, id, reserved.claims[0].token, '"ok"', ''],
      ),
    );
    expect(reply.completed).toEqual([true]);
    return { parked: reply.parked, claims: reply.claims.length };
  }

  it('a refill the rate limit held back does not announce the worker parked (only a reserve says when the window frees)', async () => {
    await producer.client.setLimits({ workflow: 'rl.single', rateLimit: { max: 1, perMs: 60_000 } });
    const scripts = scriptsOn(redis);
    for (const id of ['p1', 'p2']) await scripts.run('enqueue', enqueueKeys(keys, id), enqueueArgs(keys, 'rl.single', id, {}, false));
    expect(await completeAndRefill('p1')).toEqual({ parked: false, claims: 0 });
    expect(await redis.zscore(keys.workflow('rl.single', 'parked'), 'w:30000')).toBeNull();
  });

  it('a refill short for want of runs does announce it, and says so', async () => {
    await producer.client.setLimits({ workflow: 'rl.single', rateLimit: null });
    const scripts = scriptsOn(redis);
    expect((await completeAndRefill('p2')).claims).toBe(0); // p2 from the test above, now free of the limit
    await scripts.run('enqueue', enqueueKeys(keys, 'p3'), enqueueArgs(keys, 'rl.single', 'p3', {}, false));
    expect(await completeAndRefill('p3')).toEqual({ parked: true, claims: 0 });
    expect(await redis.zscore(keys.workflow('rl.single', 'parked'), 'w:30000')).not.toBeNull();
  });
});

@Workflow('rl.many', { groupRateLimit: { max: 1, perMs: 3_600_000 } })
class Many {
  run(input: { g: number; i: number }) {
    return input.g * 10 + input.i;
  }
}

/** rl.many as code that no longer declares the limit (its bootstrap would write it again otherwise). */
@Workflow('rl.many')
class ManyUnlimited {
  run(input: { g: number; i: number }) {
    return input.g * 10 + input.i;
  }
}

/**
 * Removing a rate limit reviews the groups it held in batches of 500, and the last limit removed
 * turns the namespace's controls off (a reserve then no longer looks at rate-held): a review whose
 * caller stopped after its first call (the process died, a reply was lost) must still finish, and
 * removing the limit again must go on with it. Each group's first run takes the group's window of
 * an hour, so its second run is held until the limit goes.
 */
describe('rate limits, a review cut short', () => {
  const GROUPS = 700;
  let redis: Redis;

  beforeAll(() => {
    redis = rawRedis();
  });
  afterAll(async () => {
    await redis.quit();
  });

  /** An app running rl.many with every group's first run done and its second held: GROUPS groups in rate-held. */
  async function heldGroups(ns: string, worker: boolean): Promise<{ app: TestApp; second: string[] }> {
    const keys = new RedisKeys('sluice', ns);
    const runner = await createApp([Many], { namespace: ns, worker: { concurrency: 64 } });
    const handles = await runner.client.enqueueMany(
      Many,
      Array.from({ length: 2 * GROUPS }, (_, k) => ({
        input: { g: k % GROUPS, i: k < GROUPS ? 0 : 1 },
        opts: { group: `g${k % GROUPS}` },
      })),
    );
    await Promise.all(handles.slice(0, GROUPS).map((h) => h.result({ timeoutMs: 30_000 })));
    expect(await redis.zcard(`${keys.base}wf:rl.many:rate-held`)).toBe(GROUPS);
    let app = runner;
    if (!worker) {
      await runner.close();
      app = await createApp([Many], { namespace: ns, worker: { enabled: false } });
    }
    return { app, second: handles.slice(GROUPS).map((h) => h.id) };
  }

  /** The first call of setLimits({ workflow, group: '*', rateLimit: null }), and no more. */
  async function removeFirstCallOnly(keys: RedisKeys): Promise<number> {
    const [, , left] = await scriptsOn(redis).run<[string, string, number]>(
      'set-control',
      [keys.limits, keys.seq],
      [keys.base, 'rate', 'rl.many', '*', '', ''],
    );
    return left;
  }

  it("the workflow's reserves finish the review: every held run completes, with no control left", async () => {
    const ns = uniqueNamespace('rl-cut');
    const keys = new RedisKeys('sluice', ns);
    const { app, second } = await heldGroups(ns, true);
    try {
      expect(await removeFirstCallOnly(keys)).toBe(GROUPS - 500);
      expect(await redis.hget(keys.limits, 'controls')).toBeNull(); // reserves no longer look at rate-held
      // Before the fix, the 200 groups the first call did not reach stayed held: their runs waiting for ever.
      expect(await Promise.all(second.map((id) => app.client.wait(id, { timeoutMs: 20_000 })))).toEqual(
        Array.from({ length: GROUPS }, (_, g) => g * 10 + 1),
      );
      expect(await redis.exists(`${keys.base}wf:rl.many:rate-review`, `${keys.base}wf:rl.many:rate-held`)).toBe(0);
      expect(await redis.hget(keys.limits, 'wf:rl.many:rate-review')).toBeNull();
      expectConsistent(await auditNamespace(redis, { namespace: ns }));
    } finally {
      await app.close();
      await dropNamespace(redis, ns);
    }
  }, 60_000);

  it('removing the limit again goes on with a review cut short', async () => {
    const ns = uniqueNamespace('rl-again');
    const keys = new RedisKeys('sluice', ns);
    const { app, second } = await heldGroups(ns, false); // no worker: only the calls below review
    try {
      expect(await removeFirstCallOnly(keys)).toBe(GROUPS - 500);
      expect(await redis.zcard(keys.workflow('rl.many', 'ready'))).toBe(500);
      // The value is unchanged (none): before the fix, this call reviewed nothing.
      expect(await app.client.setLimits({ workflow: 'rl.many', group: '*', rateLimit: null })).toBeNull();
      expect(await redis.zcard(keys.workflow('rl.many', 'ready'))).toBe(GROUPS);
      expect(await redis.exists(`${keys.base}wf:rl.many:rate-review`, `${keys.base}wf:rl.many:rate-held`)).toBe(0);
      expect(await redis.hget(keys.limits, 'wf:rl.many:rate-review')).toBeNull();
      // Once more: nothing left to review, nothing written.
      const before = await redis.hgetall(keys.limits);
      expect(await app.client.setLimits({ workflow: 'rl.many', group: '*', rateLimit: null })).toBeNull();
      expect(await redis.hgetall(keys.limits)).toEqual(before);
      const worker = await createApp([ManyUnlimited], { namespace: ns, worker: { concurrency: 64 } });
      try {
        expect(await Promise.all(second.map((id) => app.client.wait(id, { timeoutMs: 20_000 })))).toEqual(
          Array.from({ length: GROUPS }, (_, g) => g * 10 + 1),
        );
      } finally {
        await worker.close();
      }
      expectConsistent(await auditNamespace(redis, { namespace: ns }));
    } finally {
      await app.close();
      await dropNamespace(redis, ns);
    }
  }, 60_000);
});
