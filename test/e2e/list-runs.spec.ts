import { parseCompleteReply } from '../../lib/redis/commands/complete.command';
import type Redis from 'ioredis';
import { RunContext, RunInfo, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { scriptsOn } from '../support/scripts';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { expectConsistent, auditNamespace } from '../support/audit';
import { Gates, pollUntil } from '../support/workflows';

@Workflow('lr.fail', { attempts: 1 })
class FailWorkflow {
  async run(input: { n: number }): Promise<never> {
    throw new Error(`failure ${input.n}`);
  }
}

@Workflow('lr.ok', { indexCompleted: true })
class OkWorkflow {
  async run(input: { n: number }): Promise<number> {
    return input.n * 2;
  }
}

const gates = new Gates();
@Workflow('lr.hold', { indexCompleted: true })
class HoldWorkflow {
  async run(_input: unknown, ctx: RunContext): Promise<string> {
    await gates.get(ctx.runId).promise;
    return 'released';
  }
}

/** Every page of a listing, following cursors; `between` runs after each page. */
async function pageAll(
  t: TestApp,
  opts: Parameters<TestApp['client']['listRuns']>[0],
  between?: () => Promise<void>,
): Promise<{ runs: RunInfo[]; pages: number }> {
  const runs: RunInfo[] = [];
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    const page = await t.client.listRuns({ ...opts, cursor });
    pages++;
    runs.push(...page.runs);
    if (page.cursor === null) return { runs, pages };
    cursor = page.cursor;
    if (between) await between();
  }
}

describe('listRuns', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = rawRedis();
  });
  afterAll(() => redis.quit());

  describe('finished runs', () => {
    let t: TestApp;
    let namespace: string;
    let keys: RedisKeys;
    beforeAll(async () => {
      namespace = uniqueNamespace('lr');
      keys = new RedisKeys('sluice', namespace);
      t = await createApp([FailWorkflow, OkWorkflow], { namespace, worker: { concurrency: 200 } });
    });
    afterAll(async () => {
      await t.close();
      await dropNamespace(redis, namespace);
    });

    it('pages 10,000 failed runs in finish order with stable cursors while runs keep failing', async () => {
      const initial = Array.from({ length: 10_000 }, (_, i) => `f-${String(i).padStart(5, '0')}`);
      for (let i = 0; i < initial.length; i += 1000) {
        await t.client.enqueueMany(
          'lr.fail',
          initial.slice(i, i + 1000).map((id, j) => ({ input: { n: i + j }, opts: { id } })),
        );
      }
      const index = keys.finished('lr.fail', 'failed');
      await pollUntil(
        () => redis.zcard(index),
        (n) => n === initial.length,
        '10,000 failed runs',
        60_000,
      );
      const snapshot = await redis.zrange(index, 0, -1);
      expect(new Set(snapshot)).toEqual(new Set(initial));

      // Meanwhile more runs fail: a batch enqueued between pages, and waited for, so it really
      // finishes while the listing is under way.
      let extra = 0;
      const between = async () => {
        if (extra >= 2_000) return;
        const batch = Array.from({ length: 100 }, (_, i) => `g-${String(extra + i).padStart(5, '0')}`);
        extra += batch.length;
        await t.client.enqueueMany(
          'lr.fail',
          batch.map((id, j) => ({ input: { n: j }, opts: { id } })),
        );
        await pollUntil(
          () => redis.zscore(index, batch[batch.length - 1]),
          (s) => s !== null,
          'a batch failing during the listing',
        );
      };
      const { runs, pages } = await pageAll(t, { workflow: 'lr.fail', state: 'failed', limit: 333 }, between);
      expect(pages).toBeGreaterThan(30);
      const ids = runs.map((run) => run.id);
      expect(new Set(ids).size).toBe(ids.length); // no duplicates
      // No gap among the runs that existed when paging began, in the order they finished.
      expect(ids.filter((id) => id.startsWith('f-'))).toEqual(snapshot);
      // The listing is the index in score order, i.e. finish order, new runs included.
      const final = await redis.zrange(index, 0, -1);
      expect(ids).toEqual(final.slice(0, ids.length));
      expect(ids.length).toBeGreaterThan(initial.length);
      for (let i = 1; i < runs.length; i++) expect(runs[i].finishedAt!.getTime()).toBeGreaterThanOrEqual(runs[i - 1].finishedAt!.getTime());
      expect(runs.every((run) => run.state === 'failed' && run.workflow === 'lr.fail' && run.error?.message.startsWith('failure'))).toBe(
        true,
      );

      // Newest first: the exact reverse, cursors included.
      await pollUntil(
        () => redis.zcard(index),
        (n) => n === initial.length + extra,
        'every failing run in the index',
      );
      const wanted = await redis.zrange(index, 0, -1);
      const desc = await pageAll(t, { workflow: 'lr.fail', state: 'failed', limit: 1000, order: 'desc' });
      expect(desc.runs.map((run) => run.id)).toEqual([...wanted].reverse());
      expectConsistent(await auditNamespace(redis, { namespace }));
    }, 120_000);

    it('scores runs finishing in the same millisecond in finish order, not id order', async () => {
      // 32 active runs (a full commit batch) completed by one complete call (one `now`), ids in reverse order.
      const scripts = scriptsOn(redis);
      const ids = Array.from({ length: 32 }, (_, i) => `same-ms-${String(99 - i)}`);
      for (const id of ids) {
        await redis.hset(
          keys.run(id),
          'workflow',
          'lr.ok',
          'state',
          'active',
          'token',
          '7',
          'input',
          '{}',
          'attempts',
          1,
          'failures',
          0,
          'priority',
          0,
          'createdAt',
          Date.now(),
        );
        await redis.sadd(keys.workflow('lr.ok', 'active'), id);
        await redis.zadd(keys.leases, Date.now() + 60_000, id);
      }
      const reply = parseCompleteReply(
        await scripts.run<unknown[]>(
          'complete',
          [keys.call('same-ms')],
          [keys.base, 60_000, 0, 30_000, 0, '', 0, '', 0, 0, ...ids.flatMap((id) => [id, '7', '"done"', ''])],
        ),
      );
      expect(reply.completed).toEqual(ids.map(() => true));
      const index = await redis.zrange(keys.finished('lr.ok', 'completed'), 0, -1, 'WITHSCORES');
      const listed = index.filter((_, i) => i % 2 === 0).filter((id) => id.startsWith('same-ms-'));
      expect(listed).toEqual(ids);
      const finishedAt = Number(await redis.hget(keys.run(ids[0]), 'finishedAt'));
      const scores = index.filter((_, i) => i % 2 === 1).map(Number);
      expect(Math.min(...scores)).toBeGreaterThanOrEqual(finishedAt * 1024);
      const page = await t.client.listRuns({ workflow: 'lr.ok', state: 'completed', limit: 5 });
      expect(page.runs.map((run) => run.id)).toEqual(ids.slice(0, 5));
      expect(page.runs[0].result).toBe('done');
    });

    it('pages completed runs with their results; skips and drops entries whose run is gone', async () => {
      const done = await Promise.all(Array.from({ length: 25 }, (_, n) => t.client.run(OkWorkflow, { n }, { id: `ok-${n}` })));
      expect(done).toHaveLength(25);
      const index = keys.finished('lr.ok', 'completed');
      const order = (await redis.zrange(index, 0, -1)).filter((id) => id.startsWith('ok-'));
      const { runs, pages } = await pageAll(t, { workflow: OkWorkflow, state: 'completed', limit: 10 });
      const listed = runs.filter((run) => run.id.startsWith('ok-'));
      expect(listed.map((run) => run.id)).toEqual(order);
      expect(pages).toBeGreaterThanOrEqual(3);
      for (const run of listed) expect(run.result).toBe(Number(run.id.slice(3)) * 2);

      // A run whose hash expired (deleted here) is skipped, and its entry dropped.
      await redis.del(keys.run(order[3]));
      const again = await pageAll(t, { workflow: OkWorkflow, state: 'completed', limit: 7 });
      expect(again.runs.map((run) => run.id)).not.toContain(order[3]);
      expect(again.runs).toHaveLength(runs.length - 1);
      expect(await redis.zscore(index, order[3])).toBeNull();
      // Nothing failed here: that index is empty.
      expect(await t.client.listRuns({ workflow: 'lr.ok', state: 'failed' })).toEqual({ runs: [], cursor: null });
    });
  });

  describe('delayed, waiting and active runs', () => {
    let producer: TestApp;
    let worker: TestApp;
    let namespace: string;
    beforeAll(async () => {
      namespace = uniqueNamespace('lr2');
      producer = await createApp([OkWorkflow, HoldWorkflow], { namespace, worker: { enabled: false } });
      worker = await createApp([HoldWorkflow], { namespace, worker: { concurrency: 20 } });
    });
    afterAll(async () => {
      gates.openAll();
      await worker.close();
      await producer.close();
      await dropNamespace(redis, namespace);
    });

    it('pages delayed runs in due order, ties broken by id, across page boundaries', async () => {
      const base = Date.now() + 3_600_000;
      // Five due times, four runs each (a tie of four at every due time), enqueued out of order.
      const expected: string[] = [];
      for (let d = 0; d < 5; d++) for (const k of ['a', 'b', 'c', 'd']) expected.push(`d${d}-${k}`);
      const shuffled = [...expected].sort(() => Math.random() - 0.5);
      for (const id of shuffled)
        await producer.client.enqueue(
          OkWorkflow,
          { n: 1 },
          { id, runAt: new Date(base + Number(id[1]) * 1000), group: id.endsWith('a') ? 'ga' : undefined },
        );
      for (const limit of [1, 3, 4, 7, 100]) {
        const { runs } = await pageAll(producer, { workflow: OkWorkflow, state: 'delayed', limit });
        expect(runs.map((run) => run.id)).toEqual(expected);
        const desc = await pageAll(producer, { workflow: OkWorkflow, state: 'delayed', limit, order: 'desc' });
        expect(desc.runs.map((run) => run.id)).toEqual([...expected].reverse());
      }
      // A cursor whose run left meanwhile still places the next page right.
      const first = await producer.client.listRuns({ workflow: OkWorkflow, state: 'delayed', limit: 6 });
      expect(first.runs.map((run) => run.id)).toEqual(expected.slice(0, 6));
      await producer.client.cancel(expected[5]);
      const next = await producer.client.listRuns({ workflow: OkWorkflow, state: 'delayed', limit: 3, cursor: first.cursor! });
      expect(next.runs.map((run) => run.id)).toEqual(expected.slice(6, 9));
      // Group filter.
      const grouped = await pageAll(producer, { workflow: OkWorkflow, state: 'delayed', group: 'ga', limit: 2 });
      expect(grouped.runs.map((run) => run.id)).toEqual(expected.filter((id) => id.endsWith('a')));
    });

    it('pages waiting runs in claim order: priorities first, then FIFO; a group lane on its own', async () => {
      const fifo = Array.from({ length: 12 }, (_, i) => `w-${i}`);
      for (const id of fifo) await producer.client.enqueue(OkWorkflow, { n: 1 }, { id });
      await producer.client.enqueue(OkWorkflow, { n: 1 }, { id: 'w-p5', priority: 5 });
      await producer.client.enqueue(OkWorkflow, { n: 1 }, { id: 'w-p9', priority: 9 });
      for (const id of ['wg-1', 'wg-2', 'wg-3']) await producer.client.enqueue(OkWorkflow, { n: 1 }, { id, group: 'tenant' });
      const expected = ['w-p9', 'w-p5', ...fifo];
      for (const limit of [1, 5, 14, 100]) {
        const { runs } = await pageAll(producer, { workflow: 'lr.ok', state: 'waiting', limit });
        expect(runs.map((run) => run.id)).toEqual(expected);
        expect(runs.every((run) => run.state === 'waiting')).toBe(true);
        const desc = await pageAll(producer, { workflow: 'lr.ok', state: 'waiting', limit, order: 'desc' });
        expect(desc.runs.map((run) => run.id)).toEqual([...expected].reverse());
      }
      const group = await pageAll(producer, { workflow: 'lr.ok', state: 'waiting', group: 'tenant', limit: 2 });
      expect(group.runs.map((run) => run.id)).toEqual(['wg-1', 'wg-2', 'wg-3']);
      expect(group.runs.every((run) => run.group === 'tenant')).toBe(true);
    });

    it("pages active runs, and one group's", async () => {
      const ids = Array.from({ length: 6 }, (_, i) => `a-${i}`);
      for (const [i, id] of ids.entries()) await producer.client.enqueue(HoldWorkflow, {}, { id, group: i < 2 ? 'g2' : undefined });
      await pollUntil(
        () => producer.client.listRuns({ workflow: HoldWorkflow, state: 'active' }),
        (page) => page.runs.length === ids.length,
        'six active runs',
      );
      const seen = new Set<string>();
      const { runs } = await pageAll(producer, { workflow: HoldWorkflow, state: 'active', limit: 2 });
      runs.forEach((run) => seen.add(run.id));
      expect([...seen].sort()).toEqual(ids);
      expect(runs.every((run) => run.state === 'active' && run.startedAt instanceof Date)).toBe(true);
      const group = await pageAll(producer, { workflow: HoldWorkflow, state: 'active', group: 'g2' });
      expect(group.runs.map((run) => run.id).sort()).toEqual(['a-0', 'a-1']);
      for (const id of ids) gates.open(id);
      await Promise.all(ids.map((id) => producer.client.wait(id)));
      expect(await producer.client.listRuns({ workflow: HoldWorkflow, state: 'active' })).toEqual({ runs: [], cursor: null });
      const completed = await pageAll(producer, { workflow: HoldWorkflow, state: 'completed', group: 'g2', limit: 1 });
      expect(completed.runs.map((run) => run.id).sort()).toEqual(['a-0', 'a-1']);
    });
  });
});
