/**
 * Issue 30, "options that cannot be mistyped": every options object of the public API, nested ones
 * included, refuses a key it does not know with an `InvalidOptionError` naming it, before any Redis
 * call. One row per object, each calling the real API with a valid object plus a bogus key; a test
 * fails when an options type the API reports (api/*.api.md) export has no row, so a new options
 * object cannot ship unchecked.
 */
import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type Redis from 'ioredis';
import {
  defineWorkflow,
  InvalidOptionError,
  OnWorkflowEvent,
  QueueHealthIndicator,
  QueueModule,
  QueueModuleOptions,
  RunContext,
  RunHandle,
  Step,
  Workflow,
} from '../../lib';
import { basicAuthGuard, SluiceDashboardModule } from '../../lib/dashboard';
import { SluiceTesting } from '../../lib/testing';
import { createApp, dropNamespace, rawRedis, TestApp, testConnection, uniqueNamespace } from '../support/app';
import { enterMonitor } from '../support/workflows';
import { sluiceConnectionNames } from '../support/client-list';

/** The key no options object has. */
const BOGUS = { zzBogus: 1 };

@Workflow('keys.echo')
class KeysEcho {
  async run(input: unknown): Promise<unknown> {
    return input;
  }
}

/** Makes the call a row names with the options it is given: the ctx.* rows run through the harness (no Redis). */
@Workflow('keys.ctx')
class CtxKeys {
  async run(input: { call: string; opts: never }, ctx: RunContext): Promise<unknown> {
    switch (input.call) {
      case 'waitForSignal':
        return ctx.waitForSignal('x', input.opts);
      case 'waitForEvent':
        return ctx.waitForEvent('x', input.opts);
      case 'invoke':
        return ctx.invoke('keys.echo', {}, input.opts);
      case 'invokeAll':
        return ctx.invokeAll([input.opts]);
      default:
        return ctx.step('s', () => 1, input.opts);
    }
  }
}

/** Runs `call` in the harness with `opts`; throws what the run failed with. */
async function inRun(call: string, opts: object): Promise<unknown> {
  const run = await SluiceTesting.harness(new CtxKeys()).run({ call, opts: opts as never });
  if (run.state === 'failed') throw run.error;
  return run.result;
}

/** One options object: `call` hands it to the real API, valid but for the keys of `extra`; `where` is how errors name it. */
interface Row {
  /** The exported type (or the unexported shape) the object has. */
  type: string;
  /** What this row calls, to tell rows of one type apart. */
  api: string;
  where: string;
  call: (extra: object) => unknown;
  /** The call goes through this process's QueueModule: it must send nothing to Redis. */
  redis?: boolean;
}

let t: TestApp;
let namespace: string;
let handle: RunHandle<unknown>;
let boots = 0;

/** A namespace for a module boot, under the test's (so that the command watch sees anything it sends). */
const bootNamespace = () => `${namespace}-boot-${++boots}`;

/** Boots a producer-only app with `options`; resolves if it started (and closes it), rejects with what stopped it. */
async function boot(module: ReturnType<typeof QueueModule.forRoot>): Promise<void> {
  const app = await Test.createTestingModule({ imports: [module] }).compile();
  app.useLogger(false);
  await app.init();
  await app.close();
}

const forRoot = (options: Partial<QueueModuleOptions>) =>
  boot(QueueModule.forRoot({ connection: testConnection(), namespace: bootNamespace(), worker: { enabled: false }, ...options }));

const rows: Row[] = [
  // QueueModule
  { type: 'QueueModuleOptions', api: 'forRoot', where: 'QueueModule options', redis: true, call: (x) => forRoot(x) },
  {
    type: 'QueueModuleOptions',
    api: 'forRootAsync (resolved)',
    where: 'QueueModule options',
    redis: true,
    call: (x) =>
      boot(
        QueueModule.forRootAsync({
          useFactory: async () => ({ connection: testConnection(), namespace: bootNamespace(), worker: { enabled: false }, ...x }),
        }),
      ),
  },
  {
    type: 'QueueModuleAsyncOptions',
    api: 'forRootAsync',
    where: 'QueueModule.forRootAsync options',
    call: (x) => QueueModule.forRootAsync({ useFactory: () => ({ connection: testConnection() }), ...x }),
  },
  {
    type: 'WorkerOptions',
    api: 'forRoot worker',
    where: 'QueueModule options.worker',
    redis: true,
    call: (x) => forRoot({ worker: { enabled: false, ...x } }),
  },
  {
    type: 'RunDefaults',
    api: 'forRoot defaults',
    where: 'QueueModule options.defaults',
    redis: true,
    call: (x) => forRoot({ defaults: { attempts: 2, ...x } }),
  },
  {
    type: 'BackoffOptions',
    api: 'forRoot defaults.backoff',
    where: 'QueueModule options.defaults.backoff',
    redis: true,
    call: (x) => forRoot({ defaults: { backoff: { delayMs: 10, ...x } } }),
  },
  {
    type: 'TelemetryOptions',
    api: 'forRoot telemetry',
    where: 'QueueModule options.telemetry',
    redis: true,
    call: (x) => forRoot({ telemetry: { enabled: false, ...x } }),
  },
  {
    type: 'LoggingOptions',
    api: 'forRoot logging',
    where: 'QueueModule options.logging',
    redis: true,
    call: (x) => forRoot({ logging: { attemptFailed: 'debug', ...x } }),
  },
  {
    type: 'RedisClusterConnectionOptions',
    api: 'forRoot connection',
    where: 'QueueModule options.connection',
    redis: true,
    call: (x) => forRoot({ connection: { cluster: [{ host: '127.0.0.1', port: 1 }], ...x } }),
  },
  {
    type: 'ClusterSeed',
    api: 'forRoot connection.cluster[0]',
    where: 'QueueModule options.connection.cluster[0]',
    redis: true,
    call: (x) => forRoot({ connection: { cluster: [{ host: '127.0.0.1', port: 1, ...x }] } }),
  },
  {
    type: 'RedisSentinelConnectionOptions',
    api: 'forRoot connection',
    where: 'QueueModule options.connection',
    redis: true,
    call: (x) => forRoot({ connection: { sentinels: [{ host: '127.0.0.1', port: 1 }], name: 'm', ...x } }),
  },
  {
    type: 'SentinelAddress',
    api: 'forRoot connection.sentinels[0]',
    where: 'QueueModule options.connection.sentinels[0]',
    redis: true,
    call: (x) => forRoot({ connection: { sentinels: [{ host: '127.0.0.1', port: 1, ...x }], name: 'm' } }),
  },

  // Declarations
  {
    type: 'WorkflowOptions',
    api: '@Workflow',
    where: "@Workflow('keys.d') options",
    call: (x) => Workflow('keys.d', { attempts: 2, ...x }),
  },
  {
    type: 'WorkflowDedupeOptions',
    api: '@Workflow dedupe',
    where: "@Workflow('keys.d') dedupe",
    call: (x) => Workflow('keys.d', { dedupe: { key: () => 'k', ttlMs: 10, mode: 'throttle', ...x } }),
  },
  {
    type: 'BackoffOptions',
    api: '@Workflow backoff',
    where: "@Workflow('keys.d') backoff",
    call: (x) => Workflow('keys.d', { backoff: { delayMs: 10, ...x } }),
  },
  {
    type: 'RateLimit',
    api: '@Workflow rateLimit',
    where: "@Workflow('keys.d') rateLimit",
    call: (x) => Workflow('keys.d', { rateLimit: { max: 1, perMs: 1_000, ...x } }),
  },
  {
    type: 'RateLimit',
    api: '@Workflow groupRateLimit',
    where: "@Workflow('keys.d') groupRateLimit",
    call: (x) => Workflow('keys.d', { groupRateLimit: { max: 1, perMs: 1_000, ...x } }),
  },
  {
    type: 'BatchOptions',
    api: '@Workflow batch',
    where: "@Workflow('keys.d') batch",
    call: (x) => Workflow('keys.d', { batch: { maxSize: 2, maxWaitMs: 10, ...x } }),
  },
  {
    type: 'RetentionByCount',
    api: '@Workflow keep',
    where: "@Workflow('keys.d') keep",
    call: (x) => Workflow('keys.d', { keep: { completed: 5, ...x } }),
  },
  {
    type: 'DeclaredSchedule',
    api: '@Workflow schedules',
    where: "@Workflow('keys.d') schedules[0]",
    call: (x) => Workflow('keys.d', { schedules: [{ cron: '0 * * * *', ...x }] }),
  },
  {
    type: 'WorkflowContractOptions',
    api: 'defineWorkflow',
    where: "defineWorkflow('keys.c') options",
    call: (x) => defineWorkflow('keys.c', { attempts: 2, ...x }),
  },
  {
    type: 'StepOptions',
    api: '@Step',
    where: '@Step charge',
    call: (x) => Step({ name: 'charge', ...x })({}, 'charge', { value: () => 1 }),
  },
  {
    type: 'BackoffOptions',
    api: '@Step backoff',
    where: '@Step charge.backoff',
    call: (x) => Step({ attempts: 2, backoff: { delayMs: 1, ...x } })({}, 'charge', { value: () => 1 }),
  },
  {
    type: 'OnWorkflowEventOptions',
    api: '@OnWorkflowEvent',
    where: '@OnWorkflowEvent options',
    call: (x) => OnWorkflowEvent('failed', { workflow: 'keys.echo', ...x }),
  },

  // Inside a run (through the harness, the same RunContext code as a worker's)
  { type: 'StepCallOptions', api: 'ctx.step', where: 'ctx.step("s") options', call: (x) => inRun('step', { attempts: 2, ...x }) },
  {
    type: 'BackoffOptions',
    api: 'ctx.step backoff',
    where: 'ctx.step("s") options.backoff',
    call: (x) => inRun('step', { attempts: 2, backoff: { delayMs: 1, ...x } }),
  },
  {
    type: 'SignalWaitOptions',
    api: 'ctx.waitForSignal',
    where: 'ctx.waitForSignal opts',
    call: (x) => inRun('waitForSignal', { timeoutMs: 10, ...x }),
  },
  {
    type: 'EventWaitOptions',
    api: 'ctx.waitForEvent',
    where: 'ctx.waitForEvent opts',
    call: (x) => inRun('waitForEvent', { key: 'k', ...x }),
  },
  { type: 'InvokeOptions', api: 'ctx.invoke', where: 'ctx.invoke opts', call: (x) => inRun('invoke', { priority: 1, ...x }) },
  {
    type: 'InvokeCall',
    api: 'ctx.invokeAll',
    where: 'ctx.invokeAll calls[0]',
    call: (x) => inRun('invokeAll', { workflow: 'keys.echo', input: {}, ...x }),
  },
  {
    type: 'InvokeOptions',
    api: 'ctx.invokeAll opts',
    where: 'ctx.invokeAll calls[0].opts',
    call: (x) => inRun('invokeAll', { workflow: 'keys.echo', input: {}, opts: { group: 'g', ...x } }),
  },

  // QueueClient (QueueAdmin and QueueSchedules take the same objects: QueueClient hands them over)
  {
    type: 'EnqueueOptions',
    api: 'enqueue',
    where: 'opts',
    redis: true,
    call: (x) => t.client.enqueue(KeysEcho, {}, { priority: 1, ...x }),
  },
  {
    type: 'EnqueueOptions',
    api: 'enqueueMany opts',
    where: 'items[0].opts',
    redis: true,
    call: (x) => t.client.enqueueMany(KeysEcho, [{ input: {}, opts: { priority: 1, ...x } }]),
  },
  {
    type: 'EnqueueManyItem',
    api: 'enqueueMany',
    where: 'items[0]',
    redis: true,
    call: (x) => t.client.enqueueMany(KeysEcho, [{ input: {}, ...x }]),
  },
  { type: 'EnqueueOptions', api: 'run', where: 'opts', redis: true, call: (x) => t.client.run(KeysEcho, {}, { timeoutMs: 1_000, ...x }) },
  {
    type: 'DedupeOptions',
    api: 'enqueue dedupe',
    where: 'opts.dedupe',
    redis: true,
    call: (x) => t.client.enqueue(KeysEcho, {}, { dedupe: { key: 'k', ttlMs: 10, mode: 'throttle', ...x } }),
  },
  {
    type: 'DedupeOptions',
    api: 'run dedupe',
    where: 'opts.dedupe',
    redis: true,
    call: (x) => t.client.run(KeysEcho, {}, { timeoutMs: 1_000, dedupe: { key: 'k', ttlMs: 10, mode: 'debounce', ...x } }),
  },
  { type: 'WaitOptions', api: 'wait', where: 'opts', redis: true, call: (x) => t.client.wait('keys-none', { timeoutMs: 10, ...x }) },
  { type: 'WaitOptions', api: 'RunHandle.result', where: 'opts', redis: true, call: (x) => handle.result({ timeoutMs: 10, ...x }) },
  {
    type: 'CancelOptions',
    api: 'cancel',
    where: 'cancel opts',
    redis: true,
    call: (x) => t.client.cancel('keys-none', { reason: 'r', ...x }),
  },
  {
    type: 'SendEventOptions',
    api: 'sendEvent',
    where: 'sendEvent opts',
    redis: true,
    call: (x) => t.client.sendEvent('keys.event', { key: 'k', ...x }),
  },
  {
    type: 'PublishOptions',
    api: 'publish',
    where: 'publish opts',
    redis: true,
    call: (x) => t.client.publish('keys.event', {}, { key: 'k', ...x }),
  },
  {
    type: 'ListEventsOptions',
    api: 'listEvents',
    where: 'listEvents opts',
    redis: true,
    call: (x) => t.client.listEvents({ name: 'keys.event', ...x }),
  },
  {
    type: 'ListRunsOptions',
    api: 'listRuns',
    where: 'listRuns opts',
    redis: true,
    call: (x) => t.client.listRuns({ workflow: KeysEcho, state: 'failed', ...x }),
  },
  {
    type: 'RetryAllOptions',
    api: 'retryAll',
    where: 'retryAll opts',
    redis: true,
    call: (x) => t.client.retryAll({ workflow: KeysEcho, state: 'failed', ...x }),
  },
  {
    type: 'ScheduleOptions',
    api: 'schedule',
    where: 'opts',
    redis: true,
    call: (x) => t.client.schedule('keys-schedule', KeysEcho, { cron: '0 * * * *', ...x }),
  },
  {
    // The run options of an interval schedule (the same object as a cron schedule's).
    type: 'ScheduleRunOptions',
    api: 'schedule',
    where: 'opts',
    redis: true,
    call: (x) => t.client.schedule('keys-schedule', KeysEcho, { every: '5m', ...x }),
  },
  {
    type: 'ListSchedulesOptions',
    api: 'listSchedules',
    where: 'listSchedules opts',
    redis: true,
    call: (x) => t.client.listSchedules({ limit: 5, ...x }),
  },
  { type: 'MigrateOptions', api: 'migrate', where: 'migrate opts', redis: true, call: (x) => t.client.migrate({ to: 4, ...x }) },
  { type: 'PauseTarget', api: 'pause', where: 'pause target', redis: true, call: (x) => t.client.pause({ workflow: KeysEcho, ...x }) },
  { type: 'PauseTarget', api: 'resume', where: 'resume target', redis: true, call: (x) => t.client.resume({ workflow: KeysEcho, ...x }) },
  {
    type: 'LimitTarget',
    api: 'setLimits',
    where: 'setLimits target',
    redis: true,
    call: (x) => t.client.setLimits({ workflow: 'keys.echo', limit: 5, ...x }),
  },
  {
    type: 'RateLimit',
    api: 'setLimits rateLimit',
    where: 'rateLimit',
    redis: true,
    call: (x) => t.client.setLimits({ workflow: 'keys.echo', rateLimit: { max: 1, perMs: 1_000, ...x } }),
  },
  {
    type: 'LimitTarget',
    api: 'getLimits',
    where: 'getLimits target',
    redis: true,
    call: (x) => t.client.getLimits({ workflow: 'keys.echo', ...x }),
  },
  {
    type: 'HealthOptions',
    api: 'QueueHealthIndicator.isHealthy',
    where: 'isHealthy options',
    redis: true,
    call: (x) => t.app.get(QueueHealthIndicator).isHealthy('sluice', { timeoutMs: 1_000, ...x }),
  },
  { type: 'StatsOptions', api: 'stats', where: 'stats opts', redis: true, call: (x) => t.client.stats({ groups: true, ...x }) },

  // nest-sluice/dashboard
  {
    type: 'SluiceDashboardOptions',
    api: 'SluiceDashboardModule.forRoot',
    where: 'SluiceDashboardModule options',
    call: (x) => SluiceDashboardModule.forRoot({ path: '/x', ...x }),
  },
  {
    type: 'SluiceDashboardAsyncOptions',
    api: 'SluiceDashboardModule.forRootAsync',
    where: 'SluiceDashboardModule.forRootAsync options',
    call: (x) => SluiceDashboardModule.forRootAsync({ path: '/x', useFactory: () => ({}), ...x }),
  },
  {
    type: 'BasicAuthOptions',
    api: 'basicAuthGuard',
    where: 'basicAuthGuard options',
    call: (x) => basicAuthGuard({ username: 'u', password: 'p', ...x }),
  },

  // nest-sluice/testing
  {
    type: 'HarnessOptions',
    api: 'SluiceTesting.harness',
    where: 'harness options',
    call: (x) => SluiceTesting.harness(new CtxKeys(), { now: 0, ...x }),
  },
  {
    type: 'RunDefaults',
    api: 'SluiceTesting.harness defaults',
    where: 'harness options.defaults',
    call: (x) => SluiceTesting.harness(new CtxKeys(), { defaults: { attempts: 2, ...x } }),
  },
  {
    type: 'SluiceTestingOptions',
    api: 'SluiceTesting.create',
    where: 'SluiceTesting.create options',
    call: (x) => SluiceTesting.create(CtxKeys, { providers: [], ...x }),
  },
  {
    type: 'HarnessRunOptions',
    api: 'WorkflowHarness.run',
    where: 'opts',
    call: (x) => SluiceTesting.harness(new CtxKeys()).run({ call: 'step', opts: {} as never }, { id: 'r', ...x }),
  },
  {
    type: 'FailStepOptions',
    api: 'WorkflowHarness.failStep',
    where: 'failStep options',
    call: (x) => SluiceTesting.harness(new CtxKeys()).failStep('s', { onAttempt: 1, ...x }),
  },
];

/** What `call` threw or rejected with (fails the test if it did neither). */
async function failure(call: () => unknown): Promise<Error> {
  try {
    await call();
  } catch (error) {
    return error as Error;
  }
  throw new Error('the call succeeded');
}

/** Exported options types deliberately not checked, and why. */
const EXEMPT: Record<string, string> = {
  // Handed over to ioredis as it is (its fields and an ioredis instance; the cluster form is checked): users
  // bring keys of ioredis's own, which Sluice must keep accepting.
  RedisConnectionOptions: 'ioredis connection options',
};

describe('every options object refuses unknown keys', () => {
  let redis: Redis;

  beforeAll(async () => {
    namespace = uniqueNamespace('keys');
    t = await createApp([KeysEcho], { namespace, worker: { enabled: false } });
    redis = rawRedis();
    handle = await t.client.enqueue(KeysEcho, {}, { id: 'keys-handle', delayMs: '1h' });
    // Opens the connections a wait uses, so that the watch below knows them all.
    await t.client.wait('keys-handle', { timeoutMs: 1 }).catch(() => undefined);
  });
  afterAll(async () => {
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it.each(rows.map((row) => [`${row.type} (${row.api})`, row] as const))('%s', async (_label, row) => {
    const error = await failure(() => row.call(BOGUS));
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect(error.message).toMatch(new RegExp(`^${escape(row.where)}\\.zzBogus: is not an option here \\(the options are `));
  });

  it.each([
    ['SignalWaitOptions: timout', () => inRun('waitForSignal', { timout: 300 }), 'ctx.waitForSignal opts.timout', 'timeoutMs'],
    ['EventWaitOptions: timeOut', () => inRun('waitForEvent', { timeOut: 300 }), 'ctx.waitForEvent opts.timeOut', 'timeoutMs'],
    ['EnqueueOptions: delayMS', () => t.client.enqueue(KeysEcho, {}, { delayMS: 5 } as never), 'opts.delayMS', 'delayMs'],
    ['EnqueueOptions: timeout in run()', () => t.client.run(KeysEcho, {}, { timeout: 5 } as never), 'opts.timeout', 'timeoutMs'],
    ['StepCallOptions: retries', () => inRun('step', { retries: 3 }), 'ctx.step("s") options.retries', 'attempts'],
    [
      'WorkflowOptions: concurency',
      () => Workflow('keys.d', { concurency: 2 } as never),
      "@Workflow('keys.d') options.concurency",
      'concurrency',
    ],
    ['WorkerOptions: lockMS', () => forRoot({ worker: { lockMS: 5 } as never }), 'QueueModule options.worker.lockMS', 'lockMs'],
    [
      'RateLimit: duration',
      () => Workflow('keys.d', { rateLimit: { max: 1, duration: 5 } as never }),
      "@Workflow('keys.d') rateLimit.duration",
      'perMs',
    ],
  ])('suggests the key meant: %s', async (_label, call, field, meant) => {
    const error = await failure(call);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect(error.message).toContain(`${field}: is not an option here; did you mean \`${meant}\`?`);
  });

  it('accepts the deprecated timeout of a wait (only the harness, which runs no signal waits, stops it)', async () => {
    const emitWarning = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const error = await failure(() => inRun('waitForSignal', { timeout: 300 }));
      expect(error).not.toBeInstanceOf(InvalidOptionError);
      expect(error.message).toMatch(/WorkflowHarness cannot run ctx\.waitForSignal/);
      const both = await failure(() => inRun('waitForEvent', { timeout: 300, timeoutMs: 300 }));
      expect(both).toBeInstanceOf(InvalidOptionError);
      expect(both.message).toMatch(/^ctx\.waitForEvent opts\.timeout: is the old name of `timeoutMs`, which is given too/);
    } finally {
      emitWarning.mockRestore();
    }
  });

  it('sends nothing to Redis for any of the calls that go through QueueModule', async () => {
    const addresses = await sluiceAddresses(redis, namespace);
    expect(addresses.size).toBeGreaterThan(0);
    const monitor = await enterMonitor(redis);
    const seen: string[][] = [];
    const marker = `keys-marker-${namespace}`;
    let markerSeen: () => void = () => undefined;
    const markerReached = new Promise<void>((resolve) => (markerSeen = resolve));
    monitor.on('monitor', (_time: string, args: unknown[], source: string) => {
      const command = args.map(String);
      if (command.includes(marker)) return markerSeen();
      if (addresses.has(source) || command.some((arg) => arg.includes(namespace))) seen.push(command);
    });
    try {
      const redisRows = rows.filter((row) => row.redis);
      expect(redisRows.length).toBeGreaterThan(20);
      for (const row of redisRows) expect(await failure(() => row.call(BOGUS))).toBeInstanceOf(InvalidOptionError);
      // MONITOR reports commands in the order Redis ran them: once it shows the marker, it has shown every call before it.
      await redis.echo(marker);
      await markerReached;
      expect(seen).toEqual([]);

      // The watch does see this app's commands.
      await t.client.get('keys-handle');
      await redis.echo(`${marker}-2`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(seen.length).toBeGreaterThan(0);
    } finally {
      monitor.disconnect();
    }
  });

  it('has a row for every options type the public API exports (api/*.api.md)', () => {
    const reports = ['sluice.api.md', 'sluice-testing.api.md', 'sluice-dashboard.api.md'].map((file) =>
      readFileSync(join(__dirname, '..', '..', 'api', file), 'utf8'),
    );
    const exported = new Set(
      reports.flatMap((report) => [...report.matchAll(/^export (?:interface|type) (\w+Options|RateLimit)\b/gm)].map((m) => m[1])),
    );
    expect(exported.size).toBeGreaterThan(25);
    const covered = new Set(rows.map((row) => row.type));
    const missing = [...exported].filter((name) => !covered.has(name) && !(name in EXEMPT));
    expect(missing).toEqual([]);
  });

  it('leaves the exempt objects open: a connection takes ioredis keys Sluice does not know', async () => {
    await expect(forRoot({ connection: { ...testConnection(), connectTimeout: 5_000 } as never })).resolves.toBeUndefined();
  });
});

/** The addresses (`ip:port`) of the connections Sluice opened for `namespace`, as MONITOR names a command's source. */
async function sluiceAddresses(redis: Redis, namespace: string): Promise<Set<string>> {
  const names = new Set(await sluiceConnectionNames(redis, namespace));
  const list = (await redis.client('LIST')) as string;
  const addresses = list
    .split('\n')
    .filter((line) => names.has(/(?:^| )name=(\S*)/.exec(line)?.[1] ?? ''))
    .map((line) => /(?:^| )addr=(\S+)/.exec(line)?.[1] ?? '');
  return new Set(addresses.filter(Boolean));
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
