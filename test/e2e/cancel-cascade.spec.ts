import type Redis from 'ioredis';
import { RunContext, Workflow } from '../../lib';
import { CANCEL_BATCH } from '../../lib/redis/commands/cancel.command';
import { LuaScripts } from '../../lib/redis/lua.scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { scriptsOn } from '../support/scripts';
import { pollUntil } from '../support/workflows';

/**
 * A cancel that cascades over a large tree of child runs (issue 27, item 7c): each script call
 * visits a bounded number of runs and the client calls again until the cascade is done; a cascade
 * cut short (its caller gone after a call) is finished by a later cancel call.
 */
@Workflow('cc.leaf', { attempts: 1 })
class Leaf {
  async run(input: { n: number }) {
    return input.n;
  }
}

@Workflow('cc.mid', { attempts: 1 })
class Mid {
  async run(input: { count: number }, ctx: RunContext) {
    return ctx.invokeAll(Array.from({ length: input.count }, (_, n) => ({ workflow: Leaf, input: { n } })));
  }
}

@Workflow('cc.root', { attempts: 1 })
class Root {
  async run(input: { mids: number; count: number }, ctx: RunContext) {
    return ctx.invokeAll(Array.from({ length: input.mids }, () => ({ workflow: Mid, input: { count: input.count } })));
  }
}

type CancelReply = [outcome: string, state: string, cascaded: number, left: number];

describe('cancel: a cascade over thousands of children, in batches', () => {
  const ns = uniqueNamespace('ccas');
  const keys = new RedisKeys('sluice', ns);
  let redis: Redis;
  let worker: TestApp;
  let producer: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Leaf, Mid, Root], { namespace: ns, worker: { concurrency: 16 } });
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
    // The leaves stay queued: the cascade finds 'waiting' runs, as a deep backlog would leave them.
    await producer.client.pause({ workflow: 'cc.leaf' });
  });
  afterAll(async () => {
    jest.restoreAllMocks();
    await worker.close();
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const stateOf = async (id: string) => (await producer.client.get(id))?.state;
  const midOf = (root: string, n: number) => `${root}/invoke:cc.mid#${n}`;
  const leafOf = (mid: string, n: number) => `${mid}/invoke:cc.leaf#${n}`;

  /** A root waiting for `mids` mids, each waiting for `count` queued leaves. */
  async function tree(mids: number, count: number): Promise<string> {
    const root = await producer.client.enqueue('cc.root', { mids, count });
    for (let m = 1; m <= mids; m++)
      await pollUntil(
        () => stateOf(midOf(root.id, m)),
        (s) => s === 'waiting-child',
        `mid ${m} waiting`,
      );
    await pollUntil(
      () => stateOf(root.id),
      (s) => s === 'waiting-child',
      'root waiting',
    );
    return root.id;
  }

  /** The runs of the tree in each state, by their records. */
  async function states(root: string, mids: number, count: number): Promise<Record<string, number>> {
    const ids = [root];
    for (let m = 1; m <= mids; m++) {
      ids.push(midOf(root, m));
      for (let n = 1; n <= count; n++) ids.push(leafOf(midOf(root, m), n));
    }
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.hget(keys.run(id), 'state');
    const tally: Record<string, number> = {};
    for (const [, state] of (await pipeline.exec()) ?? []) tally[String(state)] = (tally[String(state)] ?? 0) + 1;
    return tally;
  }

  /** One cancel script call, as `QueueClient.cancel` makes it (`idleMs`: how still another cascade must be to be carried on). */
  const cancelOnce = (id: string, idleMs = 10_000) =>
    scriptsOn(redis).run<CancelReply>(
      'cancel',
      [keys.run(id), keys.leases, keys.limits, keys.seq, keys.cascade(id), keys.cascades],
      [
        keys.base,
        id,
        JSON.stringify({ name: 'RunCancelledError', message: 'cancelled: cut short', reason: 'cut short' }),
        'cut short',
        60_000,
        CANCEL_BATCH,
        idleMs,
      ],
    );

  it('a parent with 2,000 children: every one ends cancelled, each script call visiting at most the batch', async () => {
    const root = await tree(2, 1_000);
    const calls = jest.spyOn(LuaScripts.prototype, 'run');
    const result = await producer.client.cancel(root, { reason: 'too many' });
    const replies = await Promise.all(
      calls.mock.calls.map((call, k) =>
        call[0] === 'cancel' ? (calls.mock.results[k].value as Promise<CancelReply>) : Promise.resolve(undefined),
      ),
    );
    calls.mockRestore();

    expect(result).toEqual({ cancelled: true, state: 'waiting-child', children: 2_002 });
    const cancels = replies.filter((reply): reply is CancelReply => reply !== undefined);
    // The root, then the cascade: never more than a batch of runs a call, so several calls.
    expect(cancels.length).toBeGreaterThanOrEqual(Math.ceil(2_003 / CANCEL_BATCH));
    expect(cancels[0][2]).toBeLessThanOrEqual(CANCEL_BATCH - 1);
    for (const [, , cascaded] of cancels) expect(cascaded).toBeLessThanOrEqual(CANCEL_BATCH);
    expect(cancels[cancels.length - 1][3]).toBe(0);

    expect(await states(root, 2, 1_000)).toEqual({ cancelled: 2_003 });
    const leaf = await producer.client.get(leafOf(midOf(root, 2), 1_000));
    expect(leaf?.error).toMatchObject({ name: 'RunCancelledError', reason: 'too many' });
    expect(await redis.llen(`${keys.base}wf:cc.leaf:queue`)).toBe(0);
    expect(await redis.exists(keys.cascade(root), keys.cascades)).toBe(0);
  });

  it('a cascade cut short after one call changed at most a batch of runs; the next cancel of the run finishes it', async () => {
    const root = await tree(2, 300);
    // As a client that died after its first call.
    const [outcome, state, cascaded, left] = await cancelOnce(root);
    expect([outcome, state]).toEqual(['cancelled', 'waiting-child']);
    expect(cascaded).toBeLessThanOrEqual(CANCEL_BATCH - 1);
    expect(left).toBeGreaterThan(0);
    const after = await states(root, 2, 300);
    expect(after.cancelled).toBe(1 + cascaded);
    expect(after.cancelled).toBeLessThanOrEqual(CANCEL_BATCH);
    expect(await redis.zscore(keys.cascades, root)).not.toBeNull();

    // Cancelling it again carries the cascade on to the end (the run itself was cancelled already).
    expect(await producer.client.cancel(root)).toEqual({ cancelled: false, state: 'cancelled', children: 602 - cascaded });
    expect(await states(root, 2, 300)).toEqual({ cancelled: 603 });
    const leaf = await producer.client.get(leafOf(midOf(root, 2), 300));
    expect(leaf?.error).toMatchObject({ name: 'RunCancelledError', reason: 'cut short' });
    expect(await redis.exists(keys.cascade(root), keys.cascades)).toBe(0);
  });

  it("a cascade cut short and left still is carried on by other cancel calls' spare budget", async () => {
    const root = await tree(1, 600);
    const [, , cascaded] = await cancelOnce(root);
    const other = await producer.client.enqueue('cc.leaf', { n: -1 });
    // A call for another run with the whole budget to spare (that run is cancelled by the first),
    // taking cascades still for 0 ms: each visits at most a batch, until none is left.
    let calls = 0;
    let before = (await states(root, 1, 600)).cancelled;
    expect(before).toBe(1 + cascaded);
    while ((await redis.zcard(keys.cascades)) > 0) {
      expect((await cancelOnce(other.id, 0))[2]).toBe(0);
      const now = (await states(root, 1, 600)).cancelled;
      expect(now - before).toBeGreaterThan(0);
      expect(now - before).toBeLessThanOrEqual(CANCEL_BATCH);
      before = now;
      expect(++calls).toBeLessThan(10);
    }
    expect(await states(root, 1, 600)).toEqual({ cancelled: 602 });
    expect(await stateOf(other.id)).toBe('cancelled');
  });

  it('a cascade stops at a parent retried meanwhile: the retried run keeps the children it waits for', async () => {
    const root = await tree(2, 200);
    // Cut short with a batch of 1: only the root is cancelled, both mids are still to visit.
    const [, , cascaded, left] = await scriptsOn(redis).run<CancelReply>(
      'cancel',
      [keys.run(root), keys.leases, keys.limits, keys.seq, keys.cascade(root), keys.cascades],
      [keys.base, root, JSON.stringify({ name: 'RunCancelledError', message: 'cancelled' }), '', 60_000, 1, 10_000],
    );
    expect([cascaded, left]).toEqual([0, 2]);
    await producer.client.retry(root);
    // Another call's spare budget visits the cascade: the mids' parent is not cancelled any more.
    const other = await producer.client.enqueue('cc.leaf', { n: -2 });
    expect(await cancelOnce(other.id, 0)).toEqual(['cancelled', 'waiting', 0, 0]);
    expect(await redis.exists(keys.cascade(root), keys.cascades)).toBe(0);
    // The retried root replays and waits for the same mids again, which kept their leaves.
    await pollUntil(
      () => stateOf(root),
      (s) => s === 'waiting-child',
      'root waiting again',
    );
    // (States as stored: a run in a durable wait is 'delayed'.)
    expect(await states(root, 2, 200)).toEqual({ delayed: 3, waiting: 400 });
    expect(await producer.client.cancel(root)).toEqual({ cancelled: true, state: 'waiting-child', children: 402 });
    expect(await states(root, 2, 200)).toEqual({ cancelled: 403 });
  });

  describe('cut short, and nobody cancels again', () => {
    beforeAll(async () => {
      // The worker again, its stalled scan every 300 ms: a scan names a cascade still for that
      // long. (The gate the old worker's scan set would hold off the new one's for its interval.)
      await worker.close();
      await redis.del(keys.stallGate);
      worker = await createApp([Leaf, Mid, Root], { namespace: ns, worker: { concurrency: 16, stalledIntervalMs: 300 } });
    });

    it("a worker's stalled scan carries the cascade on to the end", async () => {
      const root = await tree(1, 400);
      const [, , cascaded, left] = await cancelOnce(root);
      expect(left).toBeGreaterThan(0);
      expect((await states(root, 1, 400)).cancelled).toBe(1 + cascaded);
      await pollUntil(
        () => redis.zcard(keys.cascades),
        (n) => n === 0,
        'the cascade carried on by a worker',
      );
      expect(await states(root, 1, 400)).toEqual({ cancelled: 402 });
      const leaf = await producer.client.get(leafOf(midOf(root, 1), 400));
      expect(leaf?.error).toMatchObject({ name: 'RunCancelledError', reason: 'cut short' });
    });

    it("…even once the cancelled run's own record has expired", async () => {
      const root = await tree(1, 400);
      const [, , , left] = await cancelOnce(root);
      expect(left).toBeGreaterThan(0);
      await redis.del(keys.run(root)); // as its retention would
      await pollUntil(
        () => redis.zcard(keys.cascades),
        (n) => n === 0,
        'the cascade carried on by a worker',
      );
      const tally = await states(root, 1, 400);
      expect(tally).toEqual({ null: 1, cancelled: 401 });
      expect(await redis.exists(keys.cascade(root))).toBe(0);
      await expect(producer.client.cancel(root)).rejects.toThrow(/does not exist/);
    });
  });

  it('the namespace is consistent at rest', async () => {
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });
});
