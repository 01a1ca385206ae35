import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import {
  CURRENT_LAYOUT,
  InvalidOptionError,
  MigrationTimeoutError,
  QueueConfigError,
  QueueModule,
  QueueModuleOptions,
  ROLLING_LAYOUT,
  RunContext,
  Workflow,
} from '../../lib';
import { LayoutMigrator } from '../../lib/migration/layout.migrator';
import { LuaScripts } from '../../lib/redis/lua.scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { RedisLink } from '../../lib/redis/redis.link';
import { createApp, dropNamespace, rawRedis, TestApp, testConnection, uniqueNamespace } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { Layout1Writer } from '../support/layout-1';
import { namespaceKeys } from '../support/workflows';

/**
 * migrate(): a namespace written by layout-1 code (0.1.0's own scripts, test/fixtures/layout-1)
 * is migrated by the current code and every run completes as it would have; repeated and
 * concurrent calls; the lock; fresh and newer layouts. (The fleet start's cost, three processes
 * migrating a large namespace at once, a producer booting without Redis and the bin are in
 * migration-fleet.spec.ts, on a server of their own.)
 */

/** Step executions, by `<key>:<step>`: a replayed step adds nothing. */
const executed: string[] = [];

@Workflow('mig.plain', { concurrency: 5 })
class PlainWorkflow {
  async run(input: { key: string }, ctx: RunContext): Promise<string> {
    const one = await ctx.step('one', async () => {
      executed.push(`${input.key}:one`);
      return `one:${input.key}`;
    });
    const two = await ctx.step('two', async () => {
      executed.push(`${input.key}:two`);
      return `two:${input.key}`;
    });
    return `${one}|${two}`;
  }
}

@Workflow('mig.grouped', { groupConcurrency: 2 })
class GroupedWorkflow {
  async run(input: { key: string }): Promise<string> {
    return `g:${input.key}`;
  }
}

const WORKFLOWS = [PlainWorkflow, GroupedWorkflow];

/** 0.1.0's caps for the two workflows: namespace 50, mig.plain 5, every group of mig.grouped 2. */
const LAYOUT_1_CAPS: Array<[string, string, string, string]> = [
  ['ns', '50', '', ''],
  ['wf:mig.plain', '5', 'mig.plain', ''],
  ['wf:mig.grouped:group', '2', 'mig.grouped', '*'],
];

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => new Error('resolved'),
    (error: unknown) => error,
  );
}

/** An app whose init may fail: resolves the app or the error (the app closed). */
async function tryApp(options: Partial<QueueModuleOptions> & { namespace: string }): Promise<unknown> {
  const app = await Test.createTestingModule({
    imports: [QueueModule.forRoot({ connection: testConnection(), ...options })],
    providers: WORKFLOWS,
  }).compile();
  app.useLogger(false);
  try {
    await app.init();
    return app;
  } catch (error) {
    await app.close().catch(() => undefined);
    return error;
  }
}

describe('migrate()', () => {
  let redis: Redis;
  const namespaces: string[] = [];
  const apps: TestApp[] = [];

  const namespace = (label: string) => {
    const ns = uniqueNamespace(label);
    namespaces.push(ns);
    return ns;
  };
  const open = async (ns: string, options: Partial<QueueModuleOptions> = {}) => {
    const app = await createApp(WORKFLOWS, { namespace: ns, ...options });
    apps.push(app);
    return app;
  };

  beforeAll(() => {
    redis = rawRedis();
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close().catch(() => undefined)));
  });
  afterAll(async () => {
    for (const ns of namespaces) await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('upgrade: runs written by layout 1 (waiting, delayed, active with a step memo, completed; caps; groups) all complete after migrate() under the current code', async () => {
    const ns = namespace('mig-up');
    const keys = new RedisKeys('sluice', ns);
    const v1 = new Layout1Writer(redis, keys);

    // --- 0.1.0 at work: a worker bootstrap, two runs claimed (one finished, one left mid-run with a step done).
    await v1.declareLimits(['mig.plain', 'mig.grouped'], LAYOUT_1_CAPS);
    await v1.enqueue('mig.plain', 'active', { key: 'active' });
    await v1.enqueue('mig.plain', 'done', { key: 'done' });
    const claims = await v1.reserve(['mig.plain'], 2, 1_000); // the lease lapses: that worker "died"
    expect(claims.map((c) => c.id).sort()).toEqual(['active', 'done']);
    const active = claims.find((c) => c.id === 'active')!;
    await v1.saveStep(active, 'one#1', 'one:from-layout-1');
    await v1.complete(
      claims.find((c) => c.id === 'done')!,
      'done-by-layout-1',
    );
    // Due, prioritised and delayed runs, and grouped runs in three groups (one of them claimed too).
    expect(await v1.enqueue('mig.plain', 'w1', { key: 'w1' })).toBe('waiting');
    expect(await v1.enqueue('mig.plain', 'w2', { key: 'w2' }, { priority: 5 })).toBe('waiting');
    expect(await v1.enqueue('mig.plain', 'd1', { key: 'd1' }, { delayMs: 1_500 })).toBe('delayed');
    const grouped: Array<[string, string, number]> = [
      ['ga1', 'a', 0],
      ['ga2', 'a', 0],
      ['ga3', 'a', 3],
      ['gb1', 'b', 0],
      ['gb2', 'b', 0],
      ['gc1', 'c', 7],
    ];
    for (const [id, group, priority] of grouped)
      expect(await v1.enqueue('mig.grouped', id, { key: id }, { group, priority })).toBe('waiting');
    const [groupedClaim] = await v1.reserve(['mig.grouped'], 1, 1_000);
    expect(groupedClaim).toBeDefined();
    const ids = ['active', 'done', 'w1', 'w2', 'd1', ...grouped.map(([id]) => id)];

    // Layout 1: no marker, no count of due grouped runs.
    expect(await redis.exists(keys.schema)).toBe(0);
    expect(await redis.hexists(keys.workflow('mig.grouped', 'stats'), 'groupDue')).toBe(0);

    // --- migrate() from a producer of the current code that does not migrate at bootstrap.
    const producer = await open(ns, { worker: { enabled: false }, migrate: false });
    // A namespace with data goes to the layout older releases share, no further unless asked.
    await expect(producer.client.migrate()).resolves.toEqual({ from: 1, to: ROLLING_LAYOUT, migrated: true });
    expect(await redis.get(keys.schema)).toBe(String(ROLLING_LAYOUT));
    // The due grouped runs, counted by the migration (not by stats' lazy fallback: stats was not called).
    expect(await redis.hmget(keys.workflow('mig.grouped', 'stats'), 'groupDue', 'groupDueExact')).toEqual(['5', '1']);
    expect(await redis.hmget(keys.workflow('mig.plain', 'stats'), 'groupDue', 'groupDueExact')).toEqual(['0', '1']);
    const report = await auditNamespace(redis, { namespace: ns, acknowledged: ids });
    expectConsistent(report);
    expect(Object.values(report.workflows['mig.grouped'].groups).reduce((sum, g) => sum + g.due, 0)).toBe(5);
    const before = await producer.client.stats();
    expect(before.namespace).toEqual({ active: 2, limit: 50 });
    expect(before.workflows['mig.plain']).toMatchObject({ waiting: 2, delayed: 1, active: 1, limit: 5, completed: 1 });
    expect(before.workflows['mig.grouped']).toMatchObject({ waiting: 5, delayed: 0, active: 1, groupLimit: 2, completed: 0 });

    // --- Asked for layout 4: every record is rewritten lean (what a reader derives is dropped),
    // and reads the same; a second call is a no-op.
    const full = await Promise.all(ids.map((id) => producer.client.get(id)));
    await expect(producer.client.migrate({ to: CURRENT_LAYOUT })).resolves.toEqual({
      from: ROLLING_LAYOUT,
      to: CURRENT_LAYOUT,
      migrated: true,
    });
    expect(await redis.get(keys.schema)).toBe(String(CURRENT_LAYOUT));
    expect(await Promise.all(ids.map((id) => producer.client.get(id)))).toEqual(full);
    expect(Object.keys(await redis.hgetall(keys.run('w1'))).sort()).toEqual(['createdAt', 'input', 'state', 'workflow']);
    expect(await redis.hmget(keys.run('w2'), 'priority', 'token', 'attempts')).toEqual(['5', null, null]);
    // A claimed run keeps its lease token (past its base) and its counts.
    expect(await redis.hmget(keys.run('active'), 'token', 'attempts')).toEqual([active.token, '1']);
    await expect(producer.client.migrate({ to: CURRENT_LAYOUT })).resolves.toEqual({
      from: CURRENT_LAYOUT,
      to: CURRENT_LAYOUT,
      migrated: false,
    });
    await expect(producer.client.migrate({ to: 5 })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(producer.client.migrate({ layout: 4 } as never)).rejects.toBeInstanceOf(InvalidOptionError);

    // --- A current worker: the active runs come back after their lease expired, the rest in turn.
    const worker = await open(ns, { worker: { lockMs: 3_000, stalledIntervalMs: 200 } });
    const results = await Promise.all(ids.map((id) => worker.client.wait(id, { timeoutMs: 20_000 })));
    expect(Object.fromEntries(ids.map((id, i) => [id, results[i]]))).toEqual({
      active: 'one:from-layout-1|two:active', // step one replayed from the memo layout 1 wrote
      done: 'done-by-layout-1',
      w1: 'one:w1|two:w1',
      w2: 'one:w2|two:w2',
      d1: 'one:d1|two:d1',
      ...Object.fromEntries(grouped.map(([id]) => [id, `g:${id}`])),
    });
    expect(executed.filter((e) => e.startsWith('active:'))).toEqual(['active:two']);
    expect(await worker.client.get('active')).toMatchObject({ state: 'completed', attempts: 2 });

    const after = await worker.client.stats();
    expect(after.namespace.active).toBe(0);
    expect(after.workflows['mig.plain']).toMatchObject({ waiting: 0, delayed: 0, active: 0, completed: 5, failed: 0 });
    expect(after.workflows['mig.grouped']).toMatchObject({ waiting: 0, delayed: 0, active: 0, completed: 6, failed: 0 });
    // The migrated count stayed exact through the current code's claims.
    expect(await redis.hmget(keys.workflow('mig.grouped', 'stats'), 'groupDue', 'groupDueExact')).toEqual(['0', '1']);
    expectConsistent(await auditNamespace(redis, { namespace: ns, acknowledged: ids }));
  });

  it('is idempotent: a second migrate() is a no-op, and a fresh namespace is only stamped', async () => {
    const ns = namespace('mig-twice');
    const keys = new RedisKeys('sluice', ns);
    const v1 = new Layout1Writer(redis, keys);
    await v1.declareLimits(['mig.grouped'], LAYOUT_1_CAPS.slice(2));
    await v1.enqueue('mig.grouped', 'x1', { key: 'x1' }, { group: 'a' });
    const app = await open(ns, { worker: { enabled: false }, migrate: false });
    await expect(app.client.migrate()).resolves.toEqual({ from: 1, to: 3, migrated: true });
    await redis.hset(keys.workflow('mig.grouped', 'stats'), 'groupDue', 42); // a second pass would recount it
    await expect(app.client.migrate()).resolves.toEqual({ from: 3, to: 3, migrated: false });
    expect(await redis.hget(keys.workflow('mig.grouped', 'stats'), 'groupDue')).toBe('42');

    // A namespace with no key at all is new: the bootstrap marks it, with nothing to migrate.
    const fresh = namespace('mig-fresh');
    const freshKeys = new RedisKeys('sluice', fresh);
    const producer = await open(fresh, { worker: { enabled: false } });
    expect(await redis.get(freshKeys.schema)).toBe(String(CURRENT_LAYOUT));
    expect(await redis.exists(freshKeys.migrateLock)).toBe(0);
    await expect(producer.client.migrate()).resolves.toEqual({ from: CURRENT_LAYOUT, to: CURRENT_LAYOUT, migrated: false });
  });

  it('a worker bootstrap migrates before the worker starts', async () => {
    const ns = namespace('mig-boot');
    const keys = new RedisKeys('sluice', ns);
    const v1 = new Layout1Writer(redis, keys);
    await v1.declareLimits(['mig.plain', 'mig.grouped'], LAYOUT_1_CAPS);
    for (const id of ['b1', 'b2', 'b3']) await v1.enqueue('mig.grouped', id, { key: id }, { group: id });
    const worker = await open(ns);
    expect(await redis.get(keys.schema)).toBe('3');
    await expect(Promise.all(['b1', 'b2', 'b3'].map((id) => worker.client.wait(id, { timeoutMs: 10_000 })))).resolves.toEqual([
      'g:b1',
      'g:b2',
      'g:b3',
    ]);
    expect(await redis.hmget(keys.workflow('mig.grouped', 'stats'), 'groupDue', 'groupDueExact')).toEqual(['0', '1']);
    expectConsistent(await auditNamespace(redis, { namespace: ns, acknowledged: ['b1', 'b2', 'b3'] }));
  });

  it('a namespace at a newer layout fails the bootstrap with QueueConfigError naming both layouts, and writes nothing', async () => {
    const ns = namespace('mig-newer');
    const keys = new RedisKeys('sluice', ns);
    const producer = await open(ns, { worker: { enabled: false } }); // a fresh namespace: marked current
    expect(await redis.get(keys.schema)).toBe(String(CURRENT_LAYOUT));
    await redis.set(keys.schema, '99'); // a newer version migrated it since
    const error = await rejection(producer.client.migrate());
    expect(error).toBeInstanceOf(QueueConfigError);
    expect((error as Error).message).toMatch(/layout 99, newer than layout 4/);

    for (const options of [{}, { worker: { enabled: false } }, { migrate: false }]) {
      const refused = await tryApp({ namespace: ns, ...options });
      expect(refused).toBeInstanceOf(QueueConfigError);
      expect((refused as Error).message).toMatch(/layout 99, newer than layout 4/);
    }
    expect(await namespaceKeys(redis, ns)).toEqual([keys.schema]); // no lock, no caps, nothing else
    expect(await redis.get(keys.schema)).toBe('99');

    await redis.set(keys.schema, 'two');
    const malformed = await tryApp({ namespace: ns });
    expect(malformed).toBeInstanceOf(QueueConfigError);
    expect((malformed as Error).message).toContain('"two"');
  });

  it('layout 2 → 3 builds the derived schedule index from the schedule hashes, in batches, idempotently', async () => {
    const ns = namespace('mig-sched');
    const keys = new RedisKeys('sluice', ns);
    const producer = await createApp(WORKFLOWS, { namespace: ns, worker: { enabled: false } });
    apps.push(producer);
    const ids = Array.from({ length: 1_201 }, (_, i) => `s${String(i).padStart(4, '0')}`); // three batches of 500
    // 100 at a time: this test is about the migration, not about 1,201 calls racing one timeout
    // on a loaded machine (each call's cron plan is computed on the event loop its reply waits for).
    for (let i = 0; i < ids.length; i += 100) {
      await Promise.all(
        ids.slice(i, i + 100).map((id) => producer.client.schedule(id, PlainWorkflow, { cron: '@hourly', input: { key: id } })),
      );
    }
    await producer.client.pauseSchedule('s0007');
    const index = keys.workflow('mig.plain', 'next-fires');
    const listing = keys.workflow('mig.plain', 'schedules');
    const expected = await redis.zrange(index, 0, -1, 'WITHSCORES');
    // Hashes without their derived keys (plus a listing entry whose hash is gone), at layout 2.
    await redis.del(index, listing);
    await redis.zadd(keys.schedules, 0, 'gone');
    await redis.set(keys.schema, '2');

    await expect(migratorFor(ns).migrate()).resolves.toEqual({ from: 2, to: 3, migrated: true });
    expect(await redis.zrange(index, 0, -1, 'WITHSCORES')).toEqual(expected);
    expect(await redis.zcard(listing)).toBe(1_201);
    expect(await redis.zscore(index, 's0007')).toBeNull();
    expect(await redis.zscore(keys.schedules, 'gone')).toBeNull();
    expectConsistent(await auditNamespace(redis, { namespace: ns }));

    // Again (e.g. a step cut short and run by the next process): the same keys.
    await redis.set(keys.schema, '2');
    await expect(migratorFor(ns).migrate()).resolves.toEqual({ from: 2, to: 3, migrated: true });
    expect(await redis.zrange(index, 0, -1, 'WITHSCORES')).toEqual(expected);
  }, 90_000); // 1,201 schedule() calls, each planning its cron: 8 s on a quiet 2-core machine, 30+ s beside other suites

  it('waits for a live lock (bounded: MigrationTimeoutError), takes over a lock whose holder died, and a stale token writes nothing', async () => {
    const ns = namespace('mig-lock');
    const keys = new RedisKeys('sluice', ns);
    const v1 = new Layout1Writer(redis, keys);
    await v1.declareLimits(['mig.grouped'], LAYOUT_1_CAPS.slice(2));
    await v1.enqueue('mig.grouped', 'l1', { key: 'l1' }, { group: 'a' });

    // Another process holds the lock and keeps it: this one waits, then gives up with a typed error.
    await redis.set(keys.migrateLock, 'someone-else', 'PX', 60_000);
    const started = Date.now();
    const timeout = await rejection(migratorFor(ns, { waitTimeoutMs: 400 }).migrate());
    expect(timeout).toBeInstanceOf(MigrationTimeoutError);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(await redis.get(keys.schema)).toBeNull();

    // Its holder "dies": the lock lapses, and the waiting process migrates.
    await redis.pexpire(keys.migrateLock, 300);
    await expect(migratorFor(ns).migrate()).resolves.toEqual({ from: 1, to: 3, migrated: true });
    expect(await redis.get(keys.schema)).toBe('3');
    expect(await redis.exists(keys.migrateLock)).toBe(0);

    // Writes check the token: without the lock, the step script and the stamp change nothing.
    await redis.set(keys.schema, '1');
    await redis.hset(keys.workflow('mig.grouped', 'stats'), 'groupDue', 7);
    const scripts = scriptsFor(ns);
    const statsKey = keys.workflow('mig.grouped', 'stats');
    expect(await scripts.run('migrate-group-due', [keys.migrateLock, statsKey], [keys.base, 'stale', 'mig.grouped', 'count', '0'])).toEqual(
      [0],
    );
    expect(await scripts.run('migrate-group-due', [keys.migrateLock, statsKey], [keys.base, 'stale', 'mig.grouped', 'write', 0])).toEqual([
      0,
    ]);
    expect(await scripts.run('migrate-lock', [keys.migrateLock, keys.schema], ['stamp', 'stale', 2])).toBe(0);
    expect(await redis.get(keys.schema)).toBe('1');
    expect(await redis.hget(statsKey, 'groupDue')).toBe('7');
  });

  const links: RedisLink[] = [];
  afterAll(() => Promise.all(links.splice(0).map((link) => link.close())));

  /** The scripts over a link of the test's own, slot-guarded in `ns` (on a cluster, a guard of another namespace is CROSSSLOT). */
  function scriptsFor(ns: string): LuaScripts {
    const link = new RedisLink('command', () => rawRedis(), 5_000, new Logger('test'));
    links.push(link);
    return new LuaScripts(link, new RedisKeys('sluice', ns));
  }

  function migratorFor(ns: string, options: { waitTimeoutMs?: number } = {}): LayoutMigrator {
    const link = new RedisLink('command', () => rawRedis(), 5_000, new Logger('test'));
    links.push(link);
    const keys = new RedisKeys('sluice', ns);
    return new LayoutMigrator(new LuaScripts(link, keys), link, keys, { log: () => undefined, warn: () => undefined }, options);
  }
});
