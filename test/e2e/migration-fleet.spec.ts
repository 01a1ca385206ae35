import { LoggerService, Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import Redis from 'ioredis';
import { QueueClient, QueueModule, QueueModuleOptions, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { uniqueNamespace } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { appOn } from '../support/fault';
import { CapturingLogger } from '../support/flow';
import { Layout1Writer } from '../support/layout-1';
import { RedisProcess } from '../support/redis-process';
import { freePort, LocalRedis, startRedisServer } from '../support/redis-server';
import { commandsBefore, monitorCommands, pollUntil } from '../support/workflows';

/**
 * migrate() across a fleet, on a redis-server of this file's own so that `INFO commandstats`
 * counts only its commands: three processes migrating a large layout-1 namespace at once do the
 * work once; a fleet start after that costs one GET per process; a producer that boots without
 * Redis migrates once Redis answers; and the `nest-sluice migrate` bin.
 */
jest.setTimeout(60_000);

@Workflow('fleet.w', { groupConcurrency: 1 })
class FleetWorkflow {
  run(input: { key: string }): string {
    return `done:${input.key}`;
  }
}

/** Commands clients send for themselves (connection set-up, this file's own reads). */
const ADMIN_COMMANDS = new Set(['info', 'config', 'client', 'hello', 'select', 'ping', 'quit', 'command']);

/** Calls per command since the last CONFIG RESETSTAT, admin commands left out (subcommands folded). */
async function commandCounts(admin: Redis): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const [, name, calls] of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const command = name.split('|')[0];
    if (!ADMIN_COMMANDS.has(command)) counts[command] = (counts[command] ?? 0) + Number(calls);
  }
  return counts;
}

/** Layout-1 data: a worker bootstrap of 0.1.0 and one due run in each of `groups` groups (plus a second in the first 100). */
async function writeLayout1(redis: Redis, ns: string, groups: number): Promise<{ ids: string[]; due: number }> {
  const v1 = new Layout1Writer(redis, new RedisKeys('sluice', ns));
  await v1.declareLimits(['fleet.w'], [['wf:fleet.w:group', '1', 'fleet.w', '*']]);
  const runs = Array.from({ length: groups }, (_, i) => ({ id: `r${i}`, group: `g${i}`, priority: 0 }));
  for (let i = 0; i < Math.min(100, groups); i++) runs.push({ id: `s${i}`, group: `g${i}`, priority: 2 });
  for (let i = 0; i < runs.length; i += 500) {
    await Promise.all(
      runs.slice(i, i + 500).map((run) => v1.enqueue('fleet.w', run.id, { key: run.id }, { group: run.group, priority: run.priority })),
    );
  }
  return { ids: runs.map((run) => run.id), due: runs.length };
}

/** A QueueModule app on `url` whose log lines the test reads. */
async function loggedApp(
  url: string,
  providers: Provider[],
  options: Partial<QueueModuleOptions> & { namespace: string },
  logger: LoggerService,
) {
  const app = await Test.createTestingModule({ imports: [QueueModule.forRoot({ connection: { url }, ...options })], providers }).compile();
  app.useLogger(logger);
  await app.init();
  return { app, client: app.get(QueueClient), close: () => app.close() };
}

const CLI = join(__dirname, '..', '..', 'lib', 'cli', 'migrate.cli.ts');

/** Runs the bin through ts-node; resolves its exit code and output. */
function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', CLI, ...args], {
      cwd: join(__dirname, '..', '..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('migrate() across a fleet (own redis-server)', () => {
  let server: LocalRedis;
  let admin: Redis;
  const apps: Array<{ close(): Promise<void> }> = [];

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close().catch(() => undefined)));
  });
  afterAll(async () => {
    admin?.disconnect();
    await server?.stop();
  });

  it('three processes migrating a large layout-1 namespace at once: one does the work in bounded batches, the others wait; the count is exact; a second migrate() is a no-op', async () => {
    const ns = uniqueNamespace('fleet-three');
    const keys = new RedisKeys('sluice', ns);
    const { ids, due } = await writeLayout1(admin, ns, 3_000);
    const producers = await Promise.all(
      [1, 2, 3].map(() => appOn(server.url, [FleetWorkflow], { namespace: ns, worker: { enabled: false }, migrate: false })),
    );
    apps.push(...producers);

    await admin.config('RESETSTAT');
    const results = await Promise.all(producers.map((p) => p.client.migrate()));
    expect(results.filter((r) => r.migrated)).toEqual([{ from: 1, to: 3, migrated: true }]);
    expect(results.map((r) => r.to)).toEqual([3, 3, 3]);
    expect(await admin.get(keys.schema)).toBe('3');
    expect(await admin.exists(keys.migrateLock)).toBe(0);
    // Done once, in batches: ~500 groups per script call (3,000 groups: about 6 SSCAN pages, plus
    // one of the workflows set); three migrations would have taken three times as many.
    const counts = await commandCounts(admin);
    expect(counts.sscan).toBeGreaterThanOrEqual(6);
    expect(counts.sscan).toBeLessThanOrEqual(10);
    expect(counts.smembers ?? 0).toBe(0); // no call reads a whole group set at once

    expect(await admin.hmget(keys.workflow('fleet.w', 'stats'), 'groupDue', 'groupDueExact')).toEqual([String(due), '1']);
    const report = await auditNamespace(admin, { namespace: ns, acknowledged: ids });
    expectConsistent(report);
    expect(Object.values(report.workflows['fleet.w'].groups).reduce((sum, g) => sum + g.due, 0)).toBe(due);

    await expect(Promise.all(producers.map((p) => p.client.migrate()))).resolves.toEqual(
      [1, 2, 3].map(() => ({ from: 3, to: 3, migrated: false })),
    );
  });

  it('three worker apps bootstrapping together migrate once, then run every layout-1 run; a fleet start after that costs one GET per process', async () => {
    const ns = uniqueNamespace('fleet-boot');
    const keys = new RedisKeys('sluice', ns);
    const { ids } = await writeLayout1(admin, ns, 1_200);
    const logger = new CapturingLogger();
    const refusals = async () => Number(/errorstat_SLUICE_LAYOUT:count=(\d+)/.exec(await admin.info('errorstats'))?.[1] ?? 0);
    const refusedBefore = await refusals();
    const workers = await Promise.all(
      [1, 2, 3].map(() => loggedApp(server.url, [FleetWorkflow], { namespace: ns, worker: { concurrency: 50 } }, logger)),
    );
    apps.push(...workers);
    expect(logger.lines.filter((line) => /Migrating namespace .* from key layout 1 to 3/.test(line))).toHaveLength(1);
    expect(logger.lines.filter((line) => /Migrated namespace .* from key layout 1 to 2/.test(line))).toHaveLength(1);
    expect(logger.lines.filter((line) => /Migrated namespace .* from key layout 2 to 3/.test(line))).toHaveLength(1);
    expect(await admin.get(keys.schema)).toBe('3');
    // Each boot's declarations and first reserve, sent before the layout was read, found layout 1
    // and did nothing (sent again after the migration): at least the reserve and declare-limits of each.
    expect((await refusals()) - refusedBefore).toBeGreaterThanOrEqual(6);

    const results = await Promise.all(ids.map((id) => workers[0].client.wait(id, { timeoutMs: 30_000 })));
    expect(results).toEqual(ids.map((id) => `done:${id}`));
    await Promise.all(workers.map((w) => w.close()));
    expect(await admin.hget(keys.workflow('fleet.w', 'stats'), 'groupDue')).toBe('0');
    expectConsistent(await auditNamespace(admin, { namespace: ns, acknowledged: ids }));

    // The next fleet start (three producers and a worker): the migration costs each one GET of `schema`.
    await admin.config('RESETSTAT');
    const producers = await Promise.all(
      [1, 2, 3].map(() => appOn(server.url, [FleetWorkflow], { namespace: ns, worker: { enabled: false } })),
    );
    apps.push(...producers);
    expect(await commandCounts(admin)).toEqual({ get: 3 });
    const gets = (await admin.info('commandstats')).match(/^cmdstat_get:calls=(\d+)/m)?.[1];
    const monitor = await monitorCommands(undefined, admin);
    let after: Record<string, number>;
    let existing: string[][];
    let seen: string[][];
    try {
      const worker = await appOn(server.url, [FleetWorkflow], { namespace: ns });
      apps.push(worker);
      after = await commandCounts(admin);
      seen = await commandsBefore(monitor, admin, `${keys.base}sentinel`);
      existing = seen.filter((args) => args[0] === 'exists').map((args) => args.slice(1));
    } finally {
      await monitor.close();
    }
    // The worker's: the layout's read, and the look at it of each call its boot sent with that
    // read, before it knew the layout (the at-layout variants, see LuaScripts.atLayout).
    const atLayout = seen.filter((args) => args[0] === 'fcall' && args[1].endsWith('_at_layout')).length;
    expect(atLayout).toBeGreaterThanOrEqual(2); // the declarations and the first reserve
    expect(seen.filter((args) => args[0] === 'get').every((args) => args[1] === keys.schema)).toBe(true);
    expect(after.get).toBe(Number(gets) + 1 + atLayout);
    for (const scan of ['scan', 'sscan']) expect(after[scan] ?? 0).toBe(0);
    // No probe for layout-1 keys: the EXISTS of a claiming call are the claim pass's look at the
    // keys it would take runs from (see claimRuns in lua/includes/claim-pass.lua) and its look
    // for a limits hash (see primeLimits in lua/includes/limits.lua).
    for (const looked of existing) {
      expect(looked.every((key) => /:(queue|waiting|wake|ready)$/.test(key)) || looked.join() === keys.limits).toBe(true);
    }
    expect(existing.length).toBe(after.exists ?? 0);
    // The two SMEMBERS are the schedule declaration's, of the workflow's (empty) set of code-declared
    // schedules, and the event-trigger declaration's, of its (empty) set of subscriptions.
    expect(after.smembers).toBe(2);
  });

  it('a producer that boots while Redis is down boots at once, and migrates once Redis answers', async () => {
    const redis = await RedisProcess.start({ port: await freePort(), args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    try {
      const ns = uniqueNamespace('fleet-down');
      const keys = new RedisKeys('sluice', ns);
      const raw = new Redis(redis.url);
      await writeLayout1(raw, ns, 10);
      raw.disconnect();
      await redis.kill('SIGKILL'); // down, its data in the AOF

      const started = Date.now();
      const producer = await appOn(redis.url, [FleetWorkflow], { namespace: ns, worker: { enabled: false }, redisTimeoutMs: 1_000 });
      apps.push(producer);
      expect(Date.now() - started).toBeLessThan(3_000);

      await redis.restart();
      const check = new Redis(redis.url);
      try {
        await pollUntil(
          () => check.get(keys.schema),
          (layout) => layout === '3',
          'the background migration',
          20_000,
        );
        expect(await check.hmget(keys.workflow('fleet.w', 'stats'), 'groupDue', 'groupDueExact')).toEqual(['20', '1']); // 10 groups, 20 due runs
      } finally {
        check.disconnect();
      }
    } finally {
      await Promise.all(apps.splice(0).map((app) => app.close().catch(() => undefined)));
      await redis.stop();
    }
  });

  it('the bin: `nest-sluice migrate` exits 0 after migrating or when there is nothing to do, 1 on a failure, 2 on bad arguments', async () => {
    const ns = uniqueNamespace('fleet-cli');
    const keys = new RedisKeys('sluice', ns);
    await writeLayout1(admin, ns, 5);
    const newer = uniqueNamespace('fleet-cli-newer');
    await admin.set(new RedisKeys('sluice', newer).schema, '99');
    const deadPort = await freePort();

    const [first, newerRun, usage, unreachable] = await Promise.all([
      runCli(['migrate', '--url', server.url, '--namespace', ns]),
      runCli(['migrate', '--url', server.url, '--namespace', newer, '--prefix', 'sluice']),
      runCli(['migrate', '--url', server.url]),
      runCli(['migrate', `--url=redis://127.0.0.1:${deadPort}`, `--namespace=${ns}`, '--redis-timeout', '2s']),
    ]);
    expect(first).toMatchObject({ code: 0, stdout: `nest-sluice: migrated {sluice:${ns}}: from key layout 1 to 3\n` });
    expect(first.stderr).toMatch(/Migrating namespace/);
    expect(await admin.get(keys.schema)).toBe('3');
    expect(await admin.hmget(keys.workflow('fleet.w', 'stats'), 'groupDue', 'groupDueExact')).toEqual(['10', '1']);

    expect(newerRun.code).toBe(1);
    expect(newerRun.stderr).toMatch(/QueueConfigError: .*key layout 99, newer than layout 4/);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/--namespace is required[\s\S]*Usage: nest-sluice migrate/);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(/RedisUnavailableError/);

    const again = await runCli(['migrate', '--url', server.url, '--namespace', ns, '--json']);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ namespace: `{sluice:${ns}}:`, from: 3, to: 3, migrated: false });

    // Layout 4 only when asked; a layout it cannot move to is a usage error.
    const [lean, badLayout] = await Promise.all([
      runCli(['migrate', '--url', server.url, '--namespace', ns, '--to', '4', '--json']),
      runCli(['migrate', '--url', server.url, '--namespace', ns, '--to=5']),
    ]);
    expect(lean.code).toBe(0);
    expect(JSON.parse(lean.stdout)).toEqual({ namespace: `{sluice:${ns}}:`, from: 3, to: 4, migrated: true });
    expect(await admin.get(keys.schema)).toBe('4');
    expect(badLayout.code).toBe(2);
    expect(badLayout.stderr).toMatch(/--to: "5" is not a layout/);
  });
});
