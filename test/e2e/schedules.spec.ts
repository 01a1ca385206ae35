import 'reflect-metadata';
import { LoggerService, Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import {
  InvalidNameError,
  InvalidOptionError,
  InvalidScheduleError,
  PayloadNotSerializableError,
  QueueClient,
  QueueModule,
  QueueModuleOptions,
  ScheduleConflictError,
  ScheduleNotFoundError,
  UnknownWorkflowError,
  Workflow,
} from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, testConnection, uniqueNamespace } from '../support/app';
import { CapturingLogger } from '../support/flow';
import { namespaceKeys } from '../support/workflows';
import type { ErrorClass } from '../support/error-class';

/** Schedule management: the client API, bad input, and the schedules code declares at bootstrap. */
@Workflow('sch.report')
class Report {
  async run(input: { region: string }) {
    return input.region;
  }
}

@Workflow('sch.other')
class Other {
  async run() {
    return 'other';
  }
}

// Two versions of the same workflow's code, deployed one after the other.
@Workflow('sch.decl', {
  schedules: [
    { id: 'decl.hourly', cron: '0 * * * *' },
    { id: 'decl.nightly', cron: '30 2 * * *', tz: 'Europe/Berlin', input: { full: true } },
  ],
})
class DeclaredV1 {
  async run() {
    return 1;
  }
}

@Workflow('sch.decl', { schedules: [{ id: 'decl.hourly', cron: '15 * * * *' }] })
class DeclaredV2 {
  async run() {
    return 2;
  }
}

@Workflow('sch.takeover', { schedules: [{ id: 'sch.taken', cron: '@daily' }] })
class Takeover {
  async run() {
    return 3;
  }
}

async function loggedApp(providers: Provider[], options: Partial<QueueModuleOptions> & { namespace: string }, logger: LoggerService) {
  const app = await Test.createTestingModule({
    imports: [QueueModule.forRoot({ connection: testConnection(), ...options })],
    providers,
  }).compile();
  app.useLogger(logger);
  await app.init();
  return { app, client: app.get(QueueClient), close: () => app.close() };
}

describe('schedules: management', () => {
  let redis: Redis;
  const opened: TestApp[] = [];
  const namespaces: string[] = [];

  beforeAll(() => {
    redis = rawRedis();
  });
  afterAll(async () => {
    await Promise.all(opened.map((app) => app.close()));
    for (const ns of namespaces) await dropNamespace(redis, ns);
    redis.disconnect();
  });

  async function producer(providers: Provider[] = [Report, Other]): Promise<{ client: QueueClient; keys: RedisKeys; ns: string }> {
    const ns = uniqueNamespace('sch');
    namespaces.push(ns);
    const app = await createApp(providers, { namespace: ns, worker: { enabled: false } });
    opened.push(app);
    return { client: app.client, keys: new RedisKeys('sluice', ns), ns };
  }

  it('schedule() stores the hash and its index entry together; get shows the next fire times from Redis time', async () => {
    const { client, keys } = await producer();
    const before = Number((await redis.time())[0]) * 1000;
    const info = await client.schedule('eu-report', Report, {
      cron: '0 9 * * MON-FRI',
      tz: 'Europe/Berlin',
      input: { region: 'eu' },
      priority: 5,
      group: 'eu',
    });
    expect(info).toMatchObject({
      id: 'eu-report',
      workflow: 'sch.report',
      cron: '0 9 * * MON-FRI',
      tz: 'Europe/Berlin',
      input: { region: 'eu' },
      priority: 5,
      group: 'eu',
      overlap: true,
      catchUp: 'latest',
      paused: false,
      source: 'api',
      fired: 0,
      skipped: 0,
      lastFireAt: null,
      lastRunId: null,
    });
    expect(info.upcoming).toHaveLength(5);
    expect(info.nextFireAt!.getTime()).toBeGreaterThan(before);
    for (const date of info.upcoming) {
      const berlin = new Intl.DateTimeFormat('en-GB', {
        timeZone: 'Europe/Berlin',
        hour: '2-digit',
        minute: '2-digit',
        weekday: 'short',
      }).format(date);
      expect(berlin).toMatch(/^(Mon|Tue|Wed|Thu|Fri) 09:00$/);
    }
    expect(Number(await redis.zscore(keys.workflow('sch.report', 'next-fires'), 'eu-report'))).toBe(info.nextFireAt!.getTime());
    expect(await redis.hget(keys.schedule('eu-report'), 'next')).toBe(String(info.nextFireAt!.getTime()));
  });

  it('the same definition again changes nothing; a changed one replans from now', async () => {
    const { client, keys } = await producer();
    await client.schedule('s1', 'sch.report', { cron: '*/5 * * * *', input: { region: 'us' } });
    const rev = await redis.hget(keys.schedule('s1'), 'rev');
    await client.schedule('s1', 'sch.report', { cron: '*/5 * * * *', input: { region: 'us' } });
    expect(await redis.hget(keys.schedule('s1'), 'rev')).toBe(rev);
    const changed = await client.schedule('s1', 'sch.report', { cron: '0 0 1 1 *', input: { region: 'us' } });
    expect(await redis.hget(keys.schedule('s1'), 'rev')).toBe(String(Number(rev) + 1));
    expect(changed.nextFireAt!.getUTCMonth()).toBe(0);
    expect(changed.nextFireAt!.getUTCDate()).toBe(1);
  });

  it('pause removes the index entry and resume restores it from now; unschedule removes every trace', async () => {
    const { client, keys } = await producer();
    await client.schedule('p1', Report, { cron: '* * * * * *', input: { region: 'x' } });
    const paused = await client.pauseSchedule('p1');
    expect(paused).toMatchObject({ paused: true, nextFireAt: null, upcoming: [] });
    expect(await redis.zscore(keys.workflow('sch.report', 'next-fires'), 'p1')).toBeNull();
    expect((await client.pauseSchedule('p1')).paused).toBe(true); // again: a no-op

    const resumed = await client.resumeSchedule('p1');
    expect(resumed.paused).toBe(false);
    expect(Number(await redis.zscore(keys.workflow('sch.report', 'next-fires'), 'p1'))).toBe(resumed.nextFireAt!.getTime());

    await expect(client.unschedule('p1')).resolves.toBe(true);
    await expect(client.unschedule('p1')).resolves.toBe(false);
    expect(await client.getSchedule('p1')).toBeNull();
    for (const key of [keys.workflow('sch.report', 'next-fires'), keys.workflow('sch.report', 'schedules'), keys.schedules]) {
      expect(await redis.zscore(key, 'p1')).toBeNull();
    }
    await expect(client.pauseSchedule('p1')).rejects.toBeInstanceOf(ScheduleNotFoundError);
    await expect(client.resumeSchedule('p1')).rejects.toBeInstanceOf(ScheduleNotFoundError);
  });

  it('listSchedules pages in id order, per workflow or all, with a cursor', async () => {
    const { client } = await producer();
    for (const id of ['e', 'a', 'd', 'b', 'c']) await client.schedule(id, Report, { cron: '@hourly', input: { region: id } });
    await client.schedule('z-other', Other, { cron: '@daily' });
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await client.listSchedules({ workflow: 'sch.report', limit: 2, cursor });
      seen.push(...page.schedules.map((s) => s.id));
      expect(page.schedules.every((s) => s.nextFireAt instanceof Date)).toBe(true);
      cursor = page.cursor ?? undefined;
      pages++;
    } while (cursor);
    expect(seen).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(pages).toBe(3);
    expect((await client.listSchedules()).schedules.map((s) => s.id)).toEqual(['a', 'b', 'c', 'd', 'e', 'z-other']);
    expect((await client.listSchedules({ workflow: 'sch.other' })).schedules.map((s) => s.id)).toEqual(['z-other']);
  });

  it('bad input is a typed error naming the value, and nothing is written', async () => {
    const { client, ns } = await producer();
    await client.schedule('taken', Other, { cron: '@daily' });
    const keysBefore = (await namespaceKeys(redis, ns)).sort();
    const hashBefore = await redis.hgetall(new RedisKeys('sluice', ns).schedule('taken'));
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const cases: Array<[() => Promise<unknown>, ErrorClass, RegExp]> = [
      [
        () => client.schedule('s', Report, { cron: '61 * * * *' }),
        InvalidScheduleError,
        /opts\.cron: "61 \* \* \* \*" is not a valid cron expression/,
      ],
      [() => client.schedule('s', Report, { cron: 'every hour' }), InvalidScheduleError, /opts\.cron: "every hour" has 2 fields/],
      [() => client.schedule('s', Report, { cron: '0 0 30 2 *' }), InvalidScheduleError, /opts\.cron: "0 0 30 2 \*"/],
      [
        () => client.schedule('s', Report, { cron: '@hourly', tz: 'Mars/Olympus' }),
        InvalidScheduleError,
        /opts\.tz: unknown time zone "Mars\/Olympus"/,
      ],
      [() => client.schedule('s', 'sch.nope', { cron: '@hourly' }), UnknownWorkflowError, /unknown workflow "sch\.nope"/],
      [
        () => client.schedule('taken', Report, { cron: '@hourly' }),
        ScheduleConflictError,
        /schedule "taken" already exists for workflow "sch\.other", not "sch\.report"/,
      ],
      [() => client.schedule('s', Report, { cron: '@hourly', input: circular as never }), PayloadNotSerializableError, /opts\.input/],
      [
        () => client.schedule('s', Report, { cron: '@hourly', input: { region: (() => 1) as never } }),
        PayloadNotSerializableError,
        /opts\.input\.region/,
      ],
      [() => client.schedule('has space', Report, { cron: '@hourly' }), InvalidNameError, /id: "has space"/],
      [() => client.schedule('s', Report, { cron: '@hourly', catchUp: 'some' as never }), InvalidOptionError, /opts\.catchUp/],
      [() => client.schedule('s', Report, { cron: '@hourly', catchUpLimit: 0 }), InvalidOptionError, /opts\.catchUpLimit/],
      [() => client.schedule('s', Report, { cron: '@hourly', overlap: 'no' as never }), InvalidOptionError, /opts\.overlap/],
      [() => client.schedule('s', Report, { cron: '@hourly', group: 'a:b' }), InvalidNameError, /opts\.group/],
      [() => client.schedule('s', Report, null as never), InvalidOptionError, /opts/],
      [() => client.listSchedules({ limit: 0 }), InvalidOptionError, /opts\.limit/],
    ];
    for (const [call, type, message] of cases) {
      const error = await call().then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error).toBeInstanceOf(type);
      expect(error!.message).toMatch(message);
    }
    expect((await namespaceKeys(redis, ns)).sort()).toEqual(keysBefore);
    expect(await redis.hgetall(new RedisKeys('sluice', ns).schedule('taken'))).toEqual(hashBefore);
  });
});

describe('schedules: declared on @Workflow, written at bootstrap', () => {
  let redis: Redis;
  const closers: Array<() => Promise<void>> = [];
  const ns = uniqueNamespace('sch-decl');
  const keys = new RedisKeys('sluice', ns);

  beforeAll(() => {
    redis = rawRedis();
  });
  afterAll(async () => {
    for (const close of closers) await close();
    await dropNamespace(redis, ns);
    redis.disconnect();
  });

  it('the latest bootstrap wins and logs changes; a schedule dropped from the code is removed, runtime ones stay', async () => {
    const v1Log = new CapturingLogger();
    const v1 = await loggedApp([DeclaredV1], { namespace: ns }, v1Log);
    closers.push(v1.close);
    expect(v1Log.lines.filter((line) => /Schedule "decl\.(hourly|nightly)" added/.test(line))).toHaveLength(2);
    expect(await v1.client.getSchedule('decl.nightly')).toMatchObject({
      source: 'code',
      tz: 'Europe/Berlin',
      input: { full: true },
      workflow: 'sch.decl',
    });
    await v1.client.schedule('decl.runtime', 'sch.decl', { cron: '@weekly' });
    const hourlyRev = await redis.hget(keys.schedule('decl.hourly'), 'rev');

    // The same code booting again changes nothing and logs nothing.
    const again = new CapturingLogger();
    const v1b = await loggedApp([DeclaredV1], { namespace: ns }, again);
    closers.push(v1b.close);
    expect(again.lines.filter((line) => /Schedule "/.test(line))).toEqual([]);
    expect(await redis.hget(keys.schedule('decl.hourly'), 'rev')).toBe(hourlyRev);

    const v2Log = new CapturingLogger();
    const v2 = await loggedApp([DeclaredV2], { namespace: ns }, v2Log);
    closers.push(v2.close);
    expect(v2Log.lines.filter((line) => /Schedule "/.test(line)).sort()).toEqual([
      expect.stringMatching(/Schedule "decl\.hourly" changed \(workflow sch\.decl, cron "15 \* \* \* \*"\)/),
      expect.stringMatching(/Schedule "decl\.nightly" removed: the code no longer declares it/),
    ]);
    expect((await v2.client.getSchedule('decl.hourly'))!.nextFireAt!.getUTCMinutes()).toBe(15);
    expect(await v2.client.getSchedule('decl.nightly')).toBeNull();
    expect(await redis.zscore(keys.workflow('sch.decl', 'next-fires'), 'decl.nightly')).toBeNull();
    expect(await v2.client.getSchedule('decl.runtime')).toMatchObject({ source: 'api' });
  });

  it('a declared id that a runtime schedule of another workflow holds fails the bootstrap with ScheduleConflictError, writing no schedule', async () => {
    const first = await createApp([Other], { namespace: ns, worker: { enabled: false } });
    closers.push(first.close);
    await first.client.schedule('sch.taken', Other, { cron: '@hourly' });
    const before = await redis.hgetall(keys.schedule('sch.taken'));
    // The failed bootstrap closes its own connections (else this file's run would not end).
    // A run waits for the workflow: the failing boot's first reserve, sent with its declarations
    // before their replies (see WorkerOrchestrator), claims it; the failed bootstrap hands it back.
    const producer = await createApp([Takeover], { namespace: ns, worker: { enabled: false } });
    closers.push(producer.close);
    const waiting = await producer.client.enqueue(Takeover, undefined, { id: 'sch.waiting' });
    await expect(createApp([Takeover], { namespace: ns })).rejects.toBeInstanceOf(ScheduleConflictError);
    expect(await redis.hgetall(keys.schedule('sch.taken'))).toEqual(before);
    expect(await redis.zcard(keys.workflow('sch.takeover', 'schedules'))).toBe(0);
    expect(await redis.zscore(keys.leases, waiting.id)).toBeNull();
    // Claimed (an attempt started: the boot had sent the reserve, and Redis ran it), handed back, no failure.
    expect(await producer.client.get(waiting.id)).toMatchObject({ state: 'waiting', attempts: 1, failures: 0 });
  });
});
