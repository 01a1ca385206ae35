import 'reflect-metadata';
import { Test, TestingModule } from '@nestjs/testing';
import Redis from 'ioredis';
import { QueueClient, QueueModule, RunContext, Workflow } from '../../lib';
import { uniqueNamespace } from '../support/app';
import { LogCapture } from '../support/log-capture';
import { RedisProcess } from '../support/redis-process';
import { pollUntil } from '../support/workflows';

/**
 * A Redis still loading its data after a restart answers most commands with `-LOADING`. Sluice
 * uses a connection only once an INFO says the load is over (its links' ready check, see
 * LinkConnection): an app booted during the load, and calls made during one, wait for it within
 * their bounds rather than fail.
 */
jest.setTimeout(60_000);

@Workflow('loading.echo')
class EchoWorkflow {
  async run(input: string, _ctx: RunContext) {
    return input;
  }
}

/** Keys saved in the RDB, each loaded a millisecond late (key-load-delay, a setting Redis has for its own tests): a load of about a second. */
const KEYS = 1_000;

describe('a Redis loading its data', () => {
  let server: RedisProcess | undefined;
  let app: TestingModule | undefined;
  let probe: Redis | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
    probe?.disconnect();
    probe = undefined;
    await server?.stop();
    server = undefined;
  });

  /** Restarts the server (SIGKILL; the RDB saved before is loaded) and resolves once it is loading; `loaded` once it is done. */
  async function restartLoading(running: RedisProcess): Promise<{ loaded: Promise<void> }> {
    const loaded = running.restart('SIGKILL');
    probe ??= running.connect({ enableReadyCheck: false, retryStrategy: () => 10 });
    const prober = probe;
    await pollUntil(
      () => prober.info('persistence').catch(() => ''),
      (info) => /^loading:1/m.test(info),
      'the restarted server to be loading',
    );
    return { loaded };
  }

  it('an app booted while Redis loads waits for the load, then starts its worker; a call during a later load waits too', async () => {
    server = await RedisProcess.start({ args: ['--key-load-delay', '1000', '--loading-process-events-interval-bytes', '1024'] });
    const admin = server.connect();
    const filler = admin.pipeline();
    for (let i = 0; i < KEYS; i++) filler.set(`filler:${i}`, 'x'.repeat(100));
    await filler.exec();
    await admin.save();
    admin.disconnect();

    const { loaded } = await restartLoading(server);
    let loadEnded = 0;
    void loaded.then(() => (loadEnded = Date.now()));
    const logs = new LogCapture();
    app = await Test.createTestingModule({
      imports: [QueueModule.forRoot({ connection: { url: server.url }, namespace: uniqueNamespace('loading'), redisTimeoutMs: 20_000 })],
      providers: [EchoWorkflow],
    }).compile();
    app.useLogger(logs);
    await app.init();
    await loaded;
    // The bootstrap waited for the load (its checks and migration ran after it), and nothing was refused.
    expect(loadEnded).toBeGreaterThan(0);
    expect(logs.find('warn')).toEqual([]);
    expect(logs.find('error')).toEqual([]);
    expect(logs.find('log', /^Worker started/)).toHaveLength(1);
    // The calls that waited for the connection went out with its ready check, were refused while
    // the server loaded (nothing ran), and were sent again once it had: none is lost or failed.
    const stats = server.connect();
    expect(Number(/errorstat_LOADING:count=(\d+)/.exec(await stats.info('errorstats'))?.[1] ?? 0)).toBeGreaterThan(0);
    stats.disconnect();
    const client = app.get(QueueClient);
    expect(await client.run(EchoWorkflow, 'after boot', { timeoutMs: 10_000 })).toBe('after boot');

    // Save what the app wrote too, so the next load has it; then restart into a load and call at once.
    const saver = server.connect();
    await saver.save();
    saver.disconnect();
    const second = await restartLoading(server);
    const during = client.run(EchoWorkflow, 'during a load', { timeoutMs: 20_000 });
    await second.loaded;
    expect(await during).toBe('during a load');
    expect(logs.find('warn', /LOADING/)).toEqual([]);
    expect(logs.find('error', /LOADING/)).toEqual([]);
  });
});
