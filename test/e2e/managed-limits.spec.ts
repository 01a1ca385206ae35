import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import {
  QueueClient,
  QueueHealth,
  QueueHealthIndicator,
  QueueModule,
  type QueueModuleOptions,
  RunCancelledError,
  RunEvents,
} from '../../lib';
import { SluiceDashboardModule } from '../../lib/dashboard';
import { luaLibrary } from '../../lib/redis/lua.library';
import { uniqueNamespace } from '../support/app';
import { within } from '../support/flow';
import { LogCapture, type LogLine } from '../support/log-capture';
import { type Cell, ManagedRedis, type Refusals } from '../support/managed-redis';
import {
  Approval,
  cancelHeard,
  executions,
  Flaky,
  Hold,
  holding,
  MANAGED_WORKFLOWS,
  Order,
  Parent,
  Tick,
  ticked,
} from '../support/managed.workflows';
import { Gates } from '../support/workflows';

/**
 * Managed Redis limits (issue 31), as a matrix: each cell is a private redis-server that refuses
 * the app some commands the way managed services and proxies do — an ACL user without them
 * (NOPERM), or the server's own rename-command (an unknown command) — and each runs the same
 * workload through a real Nest app connected as that user: every feature must work, and each
 * refusal must be said exactly once, at boot, in one line saying what was refused and what it
 * costs. The "nothing refused" cell is the control: the same checks, no line.
 */
jest.setTimeout(20_000);

const CELLS: Cell[] = [
  { name: 'nothing refused (control)', refused: {} },
  { name: 'FUNCTION LOAD refused (ACL -function|load)', deny: ['-function|load'], refused: { functions: 'FUNCTION LOAD' } },
  {
    name: 'FCALL refused too (ACL -function -fcall -fcall_ro)',
    deny: ['-function', '-fcall', '-fcall_ro'],
    refused: { functions: 'FCALL' },
  },
  { name: 'CONFIG refused (ACL -config)', deny: ['-config'], refused: { config: true } },
  { name: 'INFO refused (ACL -info)', deny: ['-info'], refused: { info: true } },
  { name: 'CLIENT SETNAME refused (ACL -client|setname)', deny: ['-client|setname'], refused: { setname: true } },
  { name: 'CLIENT refused whole (ACL -client)', deny: ['-client'], refused: { setname: true } },
  {
    name: 'all of them at once (ACL -function -fcall -fcall_ro -config -info -client)',
    deny: ['-function', '-fcall', '-fcall_ro', '-config', '-info', '-client'],
    refused: { functions: 'FCALL', config: true, info: true, setname: true },
  },
  {
    name: 'FUNCTION and CONFIG unknown (rename-command)',
    unknown: ['FUNCTION', 'CONFIG'],
    refused: { functions: 'FUNCTION LOAD', config: true },
  },
  { name: 'INFO and CLIENT unknown (rename-command)', unknown: ['INFO', 'CLIENT'], refused: { info: true, setname: true } },
];

/** How a refused reply reads in a line: an ACL's, or an unknown command's (cut before the arguments it echoes). */
const REPLY = "(NOPERM [^)]*|ERR unknown command '[^']*')";

/** Per refusal: its line's level, a pattern any line about it matches, and the line it must be. */
const LINES: Record<keyof Refusals, { level: LogLine['level']; about: RegExp; line: (refused: Refusals) => RegExp }> = {
  functions: {
    level: 'warn',
    about: /^Redis refused (FUNCTION|FCALL|the Lua function library)/,
    line: (refused) =>
      new RegExp(
        `^Redis refused ${refused.functions} \\(${REPLY}\\): the scripts run through EVALSHA instead of Sluice's Lua function library, ` +
          'which costs Redis more per call \\(grant \\+function\\|load and \\+fcall to use the library\\)$',
      ),
  },
  info: {
    level: 'warn',
    about: /^Redis refused INFO/,
    line: () => new RegExp(`^Redis refused INFO \\(${REPLY}\\): its version, maxmemory-policy and persistence were not checked`),
  },
  config: {
    level: 'log',
    about: /^Redis refused CONFIG/,
    line: () => new RegExp(`^Redis refused CONFIG GET save \\(${REPLY}\\): (whether it persists anything|its save points)`),
  },
  setname: {
    level: 'log',
    about: /^Redis refused CLIENT/,
    line: () =>
      new RegExp(
        `^Redis refused CLIENT SETNAME \\(${REPLY}\\): Sluice's connections stay unnamed in CLIENT LIST .*nothing else depends on the name`,
      ),
  },
};

const REFUSALS = Object.keys(LINES) as (keyof Refusals)[];
/** The warnings (and errors) logged are the refusals' warnings, in any order, and nothing else. */
function expectOnlyRefusalWarnings(lines: LogLine[], refused: Refusals): void {
  const warnings = lines.filter((line) => ['warn', 'error', 'fatal'].includes(line.level)).map((line) => line.message);
  const expected = REFUSALS.filter((what) => refused[what] && LINES[what].level === 'warn').map((what) => LINES[what].line(refused));
  expect(warnings).toHaveLength(expected.length);
  expect(warnings).toEqual(expect.arrayContaining(expected.map((line) => expect.stringMatching(line))));
}

describe.each(CELLS)('managed limits: $name', (cell) => {
  const namespace = uniqueNamespace('managed');
  const options = (redis: ManagedRedis): QueueModuleOptions => ({
    connection: redis.connection,
    namespace,
    redisTimeoutMs: 5_000,
    logging: { attemptFailed: false },
    worker: { shutdownTimeoutMs: 2_000 },
  });
  let redis: ManagedRedis;
  let app: INestApplication;
  let client: QueueClient;
  let origin: string;
  const logs = new LogCapture();
  /** Lines logged before the app finished booting. */
  let bootLines = 0;

  beforeAll(async () => {
    redis = await ManagedRedis.start(cell);
    const module = await Test.createTestingModule({
      imports: [
        QueueModule.forRoot(options(redis)),
        SluiceDashboardModule.forRoot({ path: '/sluice', guard: () => true, sampleMs: false }),
      ],
      providers: MANAGED_WORKFLOWS,
    }).compile();
    app = module.createNestApplication(new ExpressAdapter(), { logger: logs });
    await app.listen(0, '127.0.0.1');
    bootLines = logs.mark();
    client = app.get(QueueClient);
    origin = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
  });

  afterAll(async () => {
    await app?.close();
    await redis?.stop();
  });

  it('runs a three-step workflow: run(), and enqueue then wait()', async () => {
    expect(await client.run(Order, { n: 1 }, { timeoutMs: 10_000 })).toBe('4!');
    const handle = await client.enqueue(Order, { n: 2 });
    expect(await client.wait(handle.id, { timeoutMs: 10_000 })).toBe('6!');
  });

  it('enqueues many in one call', async () => {
    const handles = await client.enqueueMany(Order, [{ input: { n: 3 } }, { input: { n: 4 } }]);
    expect(await Promise.all(handles.map((handle) => handle.result({ timeoutMs: 10_000 })))).toEqual(['8!', '10!']);
  });

  it('retries a step in place, then a failed attempt, which replays the step', async () => {
    const handle = await client.enqueue(Flaky, {});
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ tries: 2, attempt: 2 });
    expect(executions.get(`${handle.id}:flaky`)).toBe(2);
  });

  it('waits durably for a signal: suspended, then resumed by it', async () => {
    const suspended = new Gates();
    const off = app.get(RunEvents).on('suspended', (event) => suspended.open(event.runId));
    try {
      const handle = await client.enqueue(Approval, {});
      await within(suspended.get(handle.id).promise, 10_000, 'the run suspends in its wait');
      expect(await client.get(handle.id)).toMatchObject({ state: 'waiting-signal' });
      expect(await client.signal(handle.id, 'approve', { ok: true })).toEqual({ delivered: true });
      expect(await handle.result({ timeoutMs: 10_000 })).toBe(true);
    } finally {
      off();
    }
  });

  it('invokes a child workflow', async () => {
    expect(await client.run(Parent, { n: 5 }, { timeoutMs: 10_000 })).toEqual({ child: 15 });
  });

  it('runs a delayed run once it is due', async () => {
    const handle = await client.enqueue(Order, { n: 5 }, { delayMs: 300 });
    expect(await client.get(handle.id)).toMatchObject({ state: 'delayed' });
    expect(await handle.result({ timeoutMs: 10_000 })).toBe('12!');
  });

  it('fires a cron schedule set at runtime', async () => {
    const key = `${namespace}:tick`;
    await client.schedule('tick', Tick, { cron: '* * * * * *', input: { key } });
    try {
      await within(ticked.get(key).promise, 10_000, 'the schedule fires');
      expect((await client.getSchedule('tick'))?.fired).toBeGreaterThanOrEqual(1);
    } finally {
      expect(await client.unschedule('tick')).toBe(true);
    }
  });

  it('cancels an active run: its waiters and its worker hear it', async () => {
    const handle = await client.enqueue(Hold, {});
    await within(holding.get(handle.id).promise, 10_000, 'the run to cancel starts');
    expect(await client.cancel(handle.id, { reason: 'managed limits' })).toMatchObject({ cancelled: true });
    await expect(handle.result({ timeoutMs: 10_000 })).rejects.toBeInstanceOf(RunCancelledError);
    await within(cancelHeard.get(handle.id).promise, 10_000, "the worker's ctx.signal aborts");
  });

  it("serves the dashboard's API: the overview and a run", async () => {
    const handle = await client.enqueue(Order, { n: 6 });
    await handle.result({ timeoutMs: 10_000 });
    const run = await fetch(`${origin}/sluice/api/runs/${encodeURIComponent(handle.id)}`, { signal: AbortSignal.timeout(10_000) });
    expect(run.status).toBe(200);
    expect(((await run.json()) as { run: unknown }).run).toMatchObject({ id: handle.id, workflow: 'managed.order', state: 'completed' });
    const overview = await fetch(`${origin}/sluice/api/overview`, { signal: AbortSignal.timeout(10_000) });
    expect(overview.status).toBe(200);
    const { workflows } = (await overview.json()) as { workflows: Array<{ name: string; completed: number }> };
    expect(workflows.find((workflow) => workflow.name === 'managed.order')?.completed).toBeGreaterThanOrEqual(5);
  });

  it('reports healthy (QueueHealth and QueueHealthIndicator)', async () => {
    expect(await app.get(QueueHealth).check()).toMatchObject({ healthy: true, redis: { up: true }, worker: { state: 'running' } });
    expect(await app.get(QueueHealthIndicator).isHealthy('sluice')).toMatchObject({ sluice: { status: 'up' } });
  });

  it('said each refused command exactly once, at boot, with what Sluice does instead, and warned of nothing else', () => {
    for (const what of REFUSALS) {
      const about = logs.lines.filter((line) => LINES[what].about.test(line.message));
      if (!cell.refused[what]) {
        expect(about).toEqual([]);
        continue;
      }
      expect(about).toEqual([
        expect.objectContaining({ level: LINES[what].level, message: expect.stringMatching(LINES[what].line(cell.refused)) }),
      ]);
      expect(logs.lines.indexOf(about[0])).toBeLessThan(bootLines);
    }
    expectOnlyRefusalWarnings(logs.lines, cell.refused);
  });

  it('on the server: the library or EVALSHA, as allowed; connections named, or the name not sent again once refused', async () => {
    const scriptCalls = (await redis.calls('evalsha')) + (await redis.calls('eval'));
    if (cell.refused.functions) {
      expect(await redis.libraries()).toEqual([]);
      expect(scriptCalls).toBeGreaterThan(0);
    } else {
      expect(await redis.libraries()).toEqual([luaLibrary().name]);
      expect(scriptCalls).toBe(0);
    }
    const names = await redis.appConnectionNames();
    // The command and subscriber connections at least (the blocking one opens once the worker idles).
    expect(names.length).toBeGreaterThanOrEqual(2);
    if (!cell.refused.setname) {
      expect(names).toEqual(expect.arrayContaining([`sluice:${namespace}:command`, `sluice:${namespace}:subscriber`]));
      return;
    }
    expect(names.filter(Boolean)).toEqual([]);
    // Refused once, by the first connection: the process's others, opened later, did not send it.
    if (cell.deny) expect(await redis.aclRefusals('client|setname')).toBe(1);
  });

  it('a producer-only process whose first call is enqueueMany works, and says the same once', async () => {
    const producerLogs = new LogCapture();
    const module = await Test.createTestingModule({
      imports: [QueueModule.forRoot({ ...options(redis), worker: { enabled: false } })],
      providers: MANAGED_WORKFLOWS,
    }).compile();
    module.useLogger(producerLogs);
    await module.init();
    try {
      // The namespace's layout is marked (the worker booted), so this is the process's first script call.
      const handles = await module.get(QueueClient).enqueueMany(Order, [{ input: { n: 10 } }, { input: { n: 20 } }]);
      expect(await Promise.all(handles.map((handle) => handle.result({ timeoutMs: 10_000 })))).toEqual(['22!', '42!']);
    } finally {
      await module.close();
    }
    // The worker app logs to this capture too (Nest's logger is process-wide): it repeated nothing.
    for (const what of REFUSALS) {
      const about = producerLogs.lines.filter((line) => LINES[what].about.test(line.message));
      expect(about.map((line) => line.message)).toEqual(cell.refused[what] ? [expect.stringMatching(LINES[what].line(cell.refused))] : []);
    }
    expectOnlyRefusalWarnings(producerLogs.lines, cell.refused);
  });
});
