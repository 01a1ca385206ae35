import 'reflect-metadata';
import { Test, TestingModule } from '@nestjs/testing';
import { Socket } from 'node:net';
import Redis from 'ioredis';
import {
  QueueClient,
  QueueConfigError,
  QueueHealth,
  QueueModule,
  QueueModuleOptions,
  RedisConnectionOptions,
  RunContext,
  Workflow,
} from '../../lib';
import { uniqueNamespace } from '../support/app';
import { LogCapture } from '../support/log-capture';
import { LocalRedis, startRedisServer } from '../support/redis-server';

/**
 * The boot checks against real servers: a redis-server of this file's own, so its eviction
 * policy, persistence and ACL users never leak to the tests sharing the suite's server.
 * (An unsupported version cannot be run here: see test/unit/redis-server-check.spec.ts.)
 */

@Workflow('boot.echo')
class EchoWorkflow {
  async run(input: { key: string }, _ctx: RunContext) {
    return input.key;
  }
}

/** The same workflow, its code declaring a cap: its declarations go out at every boot. */
@Workflow('boot.echo', { concurrency: 20 })
class CappedEchoWorkflow {
  async run(input: { key: string }, _ctx: RunContext) {
    return input.key;
  }
}

describe('boot checks', () => {
  let server: LocalRedis;
  let admin: Redis;
  const apps: TestingModule[] = [];

  beforeAll(async () => {
    server = await startRedisServer(['--maxmemory-policy', 'allkeys-lru']);
    admin = new Redis(server.url);
  });

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    jest.restoreAllMocks();
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    await admin.config('SET', 'appendonly', 'no');
  });

  afterAll(async () => {
    await admin.acl('DELUSER', 'sluice-noinfo', 'sluice-noconfig');
    await admin.quit();
    await server.stop();
  });

  async function boot(
    options: Partial<QueueModuleOptions> = {},
    connection: RedisConnectionOptions = { url: server.url },
    workflow: typeof EchoWorkflow = EchoWorkflow,
  ) {
    const logs = new LogCapture();
    const app = await Test.createTestingModule({
      imports: [QueueModule.forRoot({ connection, namespace: uniqueNamespace('boot'), redisTimeoutMs: 2_000, ...options })],
      providers: [workflow],
    }).compile();
    app.useLogger(logs);
    // A failed bootstrap closed its connections itself (app.close() would rethrow its error).
    await app.init();
    apps.push(app);
    return { app, logs, client: app.get(QueueClient) };
  }

  it('an allkeys-lru server: one warning explaining the data-loss risk, one note about the missing persistence, and the worker runs', async () => {
    const { logs, client } = await boot();
    const warnings = logs.find('warn');
    expect(warnings.map((line) => line.message)).toEqual([
      'Redis maxmemory-policy is allkeys-lru (maxmemory is 0 now, so nothing is evicted until a limit is set): under memory pressure Redis may evict any key, ' +
        'including queued and active runs, which are then lost without an error and leave the queues inconsistent. Use noeviction (writes then fail with an OOM error instead) or a volatile-* policy',
    ]);
    expect(warnings[0].context).toBe('Sluice');
    expect(logs.find('log', /^Redis has no persistence \(appendonly no, no save points\)/)).toHaveLength(1);
    expect(await client.run(EchoWorkflow, { key: 'k' }, { timeoutMs: 10_000 })).toBe('k');
  });

  it('strict: true refuses an allkeys-* server with QueueConfigError before anything is written', async () => {
    const namespace = uniqueNamespace('strict');
    const failed = boot({ strict: true, namespace });
    await expect(failed).rejects.toThrow(QueueConfigError);
    await expect(failed).rejects.toThrow(/^Redis maxmemory-policy is allkeys-lru .*; refused because strict is true$/);
    expect(await admin.keys(`{sluice:${namespace}}:*`)).toEqual([]);
  });

  it('noeviction with AOF on: no warning and no note; volatile-* with strict: a note only', async () => {
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'appendonly', 'yes');
    const quiet = await boot({ strict: true });
    expect(quiet.logs.find('warn')).toEqual([]);
    expect(quiet.logs.find('log', /^Redis /)).toEqual([]);

    await admin.config('SET', 'maxmemory-policy', 'volatile-lru');
    const volatile = await boot({ strict: true });
    expect(volatile.logs.find('warn')).toEqual([]);
    expect(volatile.logs.find('log', 'Redis maxmemory-policy is volatile-lru')).toHaveLength(1);
  });

  it('a user whose ACL denies INFO and CONFIG still boots, with one warning saying what was not checked', async () => {
    await admin.acl('SETUSER', 'sluice-noinfo', 'reset', 'on', '>secret', '~*', '&*', '+@all', '-info', '-config');
    // Sluice's connections make their ready check themselves (ioredis's would print a console
    // warning on each connect that it skips it): a refused INFO passes it silently.
    const consoleWarn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    const { logs, app, client } = await boot({}, { url: server.url, username: 'sluice-noinfo', password: 'secret' });
    expect(logs.find('warn').map((line) => line.message)).toEqual([
      expect.stringMatching(
        /^Redis refused INFO \(NOPERM.*info.*\): its version, maxmemory-policy and persistence were not checked \(grant \+info to check them\)$/,
      ),
    ]);
    expect(await client.run(EchoWorkflow, { key: 'acl' }, { timeoutMs: 10_000 })).toBe('acl');
    expect(await app.get(QueueHealth).check()).toMatchObject({ healthy: true });
    // The user really is denied both (the warning is not about something else).
    const limited = new Redis(server.url, { username: 'sluice-noinfo', password: 'secret', enableReadyCheck: false });
    await expect(limited.info()).rejects.toThrow(/NOPERM/);
    await expect(limited.config('GET', 'save')).rejects.toThrow(/NOPERM/);
    limited.disconnect();
    // The app's connections (each connect warns) are closed before the console is given back.
    await apps.splice(apps.indexOf(app), 1)[0].close();
    const warned = consoleWarn.mock.calls.map(([message]) => String(message));
    consoleWarn.mockRestore();
    expect(warned).toEqual([]);
  });

  it('CONFIG GET save rides the ready check: asked once per boot, and its refusal is the note about persistence', async () => {
    // appendonly no (afterEach): the check needs the save points, and asks with the connection's
    // ready check rather than after it. (MONITOR does not show CONFIG: commandstats count it.)
    const configGets = async () => Number(/cmdstat_config\|get:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0);
    const before = await configGets();
    const { logs } = await boot();
    expect((await configGets()) - before).toBe(1);
    expect(logs.find('log', 'Redis has no persistence')).toHaveLength(1);

    await admin.acl('SETUSER', 'sluice-noconfig', 'reset', 'on', '>secret', '~*', '&*', '+@all', '-config');
    const limited = await boot({}, { url: server.url, username: 'sluice-noconfig', password: 'secret' });
    expect(limited.logs.find('log').map((line) => line.message)).toContainEqual(
      expect.stringMatching(
        /^Redis refused CONFIG GET save \(NOPERM.*config.*\): whether it persists anything \(AOF is off\) was not checked$/,
      ),
    );
    expect(await limited.client.run(EchoWorkflow, { key: 'noconfig' }, { timeoutMs: 10_000 })).toBe('noconfig');
  });

  it.each([
    ['declares a cap: its declarations', CappedEchoWorkflow, ['declare_limits_at_layout', 'set_control_at_layout']],
    ['declares nothing: the check that Redis holds it already, failing on a fresh namespace,', EchoWorkflow, []],
  ])("a worker's first write, for code that %s and its first reserve; the run waiting for it runs once", async (_what, workflow, sent) => {
    const namespace = uniqueNamespace('first-write');
    const producer = await boot({ namespace, worker: { enabled: false } }); // marks the fresh namespace's layout
    const waiting = await producer.client.enqueue(EchoWorkflow, { key: 'first' });
    // What each socket writes, write by write (a corked batch is one write): Node's internal hook,
    // the one place every socket write goes through.
    const writes = new Map<Socket, string[]>();
    const proto = Socket.prototype as unknown as { _writeGeneric: (writev: boolean, data: unknown, ...rest: unknown[]) => unknown };
    const writeGeneric = proto._writeGeneric;
    proto._writeGeneric = function (this: Socket, writev: boolean, data: unknown, ...rest: unknown[]) {
      const text = writev ? (data as Array<{ chunk: unknown }>).map(({ chunk }) => String(chunk)).join('') : String(data);
      (writes.get(this) ?? writes.set(this, []).get(this)!).push(text);
      return writeGeneric.call(this, writev, data, ...rest);
    };
    try {
      await boot({ namespace }, undefined, workflow);
      expect(await waiting.result({ timeoutMs: 10_000 })).toBe('first');
    } finally {
      proto._writeGeneric = writeGeneric;
    }
    // The worker's command connection: its first write is the ready check's INFO, and holds the
    // layout's read, the declarations (or the check) and the reserve, those at the layout (see LuaScripts.atLayout).
    const first = [...writes.values()].map((sent) => sent[0]).filter((text) => /\bINFO\b/i.test(text) && /reserve_at_layout/.test(text));
    expect(first).toHaveLength(1);
    for (const part of [namespace, 'schema', 'reserve_at_layout', ...sent]) expect(first[0]).toContain(part);
    if (sent.length === 0) expect(first[0]).not.toMatch(/declare_limits|set_control|schedule_write/);
    expect(await producer.client.get(waiting.id)).toMatchObject({ state: 'completed', attempts: 1 });
  });
});
