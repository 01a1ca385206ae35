import type Redis from 'ioredis';
import { Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { namespaceKeys, pollUntil } from '../support/workflows';

@Workflow('ret.keep', { attempts: 1, keep: { completed: 100, failed: 10 } })
class KeepWorkflow {
  async run(input: { fail?: boolean }): Promise<number> {
    if (input.fail) throw new Error('asked to fail');
    return 1;
  }
}

@Workflow('ret.none', { keep: { completed: 0 } })
class KeepNoneWorkflow {
  async run(input: { n: number }): Promise<number> {
    return input.n + 1;
  }
}

@Workflow('ret.plain', { indexCompleted: true })
class PlainWorkflow {
  async run(): Promise<string> {
    return 'plain';
  }
}

/** The same workflow name, declared by a later release without `keep`. */
@Workflow('ret.keep', { attempts: 1 })
class KeepRemovedWorkflow {
  async run(): Promise<number> {
    return 2;
  }
}

describe('retention', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = rawRedis();
  });
  afterAll(() => redis.quit());

  describe('by count', () => {
    let t: TestApp;
    let namespace: string;
    let keys: RedisKeys;
    const runKeys = async (prefix: string) => (await namespaceKeys(redis, namespace)).filter((key) => key.startsWith(keys.run(prefix)));

    beforeAll(async () => {
      namespace = uniqueNamespace('ret');
      keys = new RedisKeys('sluice', namespace);
      t = await createApp([KeepWorkflow, KeepNoneWorkflow, PlainWorkflow], { namespace, worker: { concurrency: 200 } });
    });
    afterAll(async () => {
      await t.close();
      await dropNamespace(redis, namespace);
    });

    it('is written fleet-wide at bootstrap, in the limits hash', async () => {
      const limits = await redis.hgetall(keys.limits);
      expect(limits).toMatchObject({
        'wf:ret.keep:keep:completed': '100',
        'wf:ret.keep:keep:failed': '10',
        'wf:ret.none:keep:completed': '0',
      });
      expect(limits['wf:ret.none:keep:failed']).toBeUndefined();
      expect(Object.keys(limits).filter((field) => field.startsWith('wf:ret.plain:keep'))).toEqual([]);
    });

    it('keeps exactly the newest 100 of 20,000 completions; a trimmed id can be enqueued again', async () => {
      const index = keys.finished('ret.keep', 'completed');
      const older = Array.from({ length: 19_900 }, (_, i) => `k-${String(i).padStart(5, '0')}`);
      for (let i = 0; i < older.length; i += 1000) {
        await t.client.enqueueMany(
          KeepWorkflow,
          older.slice(i, i + 1000).map((id) => ({ input: {}, opts: { id } })),
        );
      }
      await pollUntil(
        () => redis.hget(keys.workflow('ret.keep', 'stats'), 'completed'),
        (n) => Number(n) === older.length,
        '19,900 completions',
        90_000,
      );
      expect(await redis.zcard(index)).toBe(100);
      expect(await runKeys('k-')).toHaveLength(100);
      const kept = await redis.zrange(index, 0, -1);
      for (const id of kept) expect(await redis.hget(keys.run(id), 'state')).toBe('completed');

      // The last 100 finish after every earlier one: they, and only they, remain.
      const newest = Array.from({ length: 100 }, (_, i) => `last-${String(i).padStart(3, '0')}`);
      await t.client.enqueueMany(
        KeepWorkflow,
        newest.map((id) => ({ input: {}, opts: { id } })),
      );
      await Promise.all(newest.map((id) => t.client.wait(id)));
      expect(new Set(await redis.zrange(index, 0, -1))).toEqual(new Set(newest));
      expect(await runKeys('k-')).toEqual([]);
      expect(await runKeys('last-')).toHaveLength(100);
      expect(Number(await redis.hget(keys.workflow('ret.keep', 'stats'), 'completed'))).toBe(20_000);

      // A trimmed id is free: enqueued again it is a new run; the oldest kept one makes room.
      const before = await redis.zrange(index, 0, -1);
      const again = await t.client.enqueue(KeepWorkflow, {}, { id: 'k-00000' });
      expect(again.created).toBe(true);
      expect(await again.result()).toBe(1);
      expect(await redis.zrange(index, 0, -1)).toEqual([...before.slice(1), 'k-00000']);
      expect(await redis.exists(keys.run(before[0]))).toBe(0);
      expectConsistent(await auditNamespace(redis, { namespace }));
    }, 120_000);

    it('keeps the newest failed runs apart from the completed ones', async () => {
      const index = keys.finished('ret.keep', 'failed');
      const first = Array.from({ length: 40 }, (_, i) => `bad-${i}`);
      await t.client.enqueueMany(
        KeepWorkflow,
        first.map((id) => ({ input: { fail: true }, opts: { id } })),
      );
      await pollUntil(
        () => redis.hget(keys.workflow('ret.keep', 'stats'), 'failed'),
        (n) => Number(n) === 40,
        '40 failures',
      );
      expect(await redis.zcard(index)).toBe(10);
      const last = Array.from({ length: 10 }, (_, i) => `worse-${i}`);
      await t.client.enqueueMany(
        KeepWorkflow,
        last.map((id) => ({ input: { fail: true }, opts: { id } })),
      );
      await pollUntil(
        () => redis.hget(keys.workflow('ret.keep', 'stats'), 'failed'),
        (n) => Number(n) === 50,
        '50 failures',
      );
      expect(new Set(await redis.zrange(index, 0, -1))).toEqual(new Set(last));
      expect(await runKeys('bad-')).toEqual([]);
      expect(await redis.zcard(keys.finished('ret.keep', 'completed'))).toBe(100);
      const page = await t.client.listRuns({ workflow: KeepWorkflow, state: 'failed' });
      expect(page.runs.map((run) => run.id).sort()).toEqual([...last].sort());
    });

    it('keep 0: the waiter still gets the result, then nothing is kept', async () => {
      expect(await t.client.run(KeepNoneWorkflow, { n: 41 }, { id: 'none-1' })).toBe(42);
      // Many at once, fast-pathed to an idle worker: each record is gone the moment its run
      // finishes, so run() must have subscribed before it enqueued.
      const many = await Promise.all(
        Array.from({ length: 100 }, (_, i) => t.client.run(KeepNoneWorkflow, { n: i }, { id: `none-many-${i}` })),
      );
      expect(many).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
      expect(await redis.exists(keys.run('none-1'))).toBe(0);
      expect(await redis.zcard(keys.finished('ret.none', 'completed'))).toBe(0);
      expect(await t.client.run(PlainWorkflow, undefined, { id: 'plain-1' })).toBe('plain');
      expect(await redis.exists(keys.run('plain-1'))).toBe(1);
    });

    it('the audit checks the finish indexes', async () => {
      expectConsistent(await auditNamespace(redis, { namespace }));
      // An entry pointing to a run in another state is a violation…
      await t.client.enqueue(PlainWorkflow, undefined, { id: 'plain-later', delayMs: 3_600_000 });
      await redis.zadd(keys.finished('ret.plain', 'failed'), Date.now() * 1024, 'plain-later');
      const report = await auditNamespace(redis, { namespace });
      expect(report.violations.map((v) => [v.rule, v.id])).toEqual([['finish-index', 'plain-later']]);
      await redis.zrem(keys.finished('ret.plain', 'failed'), 'plain-later');
      // …and so is a finished run missing from its index.
      await t.client.run(PlainWorkflow, undefined, { id: 'plain-2' });
      await redis.zrem(keys.finished('ret.plain', 'completed'), 'plain-2');
      const missing = await auditNamespace(redis, { namespace });
      expect(missing.violations.map((v) => [v.rule, v.id])).toEqual([['finish-index', 'plain-2']]);
      await redis.zadd(
        keys.finished('ret.plain', 'completed'),
        Number(await redis.hget(keys.run('plain-2'), 'finishedAt')) * 1024,
        'plain-2',
      );
      expectConsistent(await auditNamespace(redis, { namespace }));
    });

    it('a later bootstrap without keep removes it', async () => {
      const next = await createApp([KeepRemovedWorkflow], { namespace, worker: { enabled: true } });
      try {
        const limits = await redis.hgetall(keys.limits);
        expect(limits['wf:ret.keep:keep:completed']).toBeUndefined();
        expect(limits['wf:ret.keep:keep:failed']).toBeUndefined();
      } finally {
        await next.close();
      }
    });
  });

  it('by time: index entries of expired runs are trimmed as runs keep finishing', async () => {
    const namespace = uniqueNamespace('ret-ttl');
    const keys = new RedisKeys('sluice', namespace);
    const t = await createApp([PlainWorkflow], { namespace, defaults: { resultTtlMs: 200 } });
    try {
      const ids = Array.from({ length: 5 }, (_, i) => `ttl-${i}`);
      await Promise.all(ids.map((id) => t.client.run(PlainWorkflow, undefined, { id })));
      const index = keys.finished('ret.plain', 'completed');
      expect(await redis.zcard(index)).toBe(5);
      await pollUntil(
        () => redis.exists(...ids.map((id) => keys.run(id))),
        (n) => n === 0,
        'the runs expiring',
      );
      expect(await redis.zcard(index)).toBe(5); // nothing finished since: still there
      await redis.zadd(index, 1, 'ancient'); // one more, older still
      // Expired entries are looked for once per 64 finishes of a state (TRIM_EVERY in finish.lua):
      // 64 more finishes certainly cross one.
      const fresh = Array.from({ length: 64 }, (_, i) => `ttl-new-${i}`);
      await Promise.all(fresh.map((id) => t.client.run(PlainWorkflow, undefined, { id })));
      const left = await redis.zrange(index, 0, -1);
      expect(left.filter((id) => !id.startsWith('ttl-new-'))).toEqual([]);
      const listed = (await t.client.listRuns({ workflow: PlainWorkflow, state: 'completed', limit: 1000 })).runs.map((run) => run.id);
      expect(listed.every((id) => id.startsWith('ttl-new-'))).toBe(true);
    } finally {
      await t.close();
      await dropNamespace(redis, namespace);
    }
  });
});
