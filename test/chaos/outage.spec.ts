import type { TestingModule } from '@nestjs/testing';
import { QueueHealth, RedisConnectionError, RedisUnavailableError, RunContext, Workflow } from '../../lib';
import { RedisConnections } from '../../lib/redis/redis.connections';
import { uniqueNamespace } from '../support/app';
import Redis from 'ioredis';
import { auditNamespace, expectConsistent } from '../support/audit';
import { appOn } from '../support/fault';
import { RedisProcess } from '../support/redis-process';
import { freePort } from '../support/redis-server';
import { Gates, pollUntil } from '../support/workflows';

/**
 * Redis itself away: not running when the app boots, killed (SIGKILL) while the app runs and
 * started again on the same port and data directory. Nothing may crash, hang or need a restart.
 */
jest.setTimeout(120_000);

const gates = new Gates();

@Workflow('outage.echo', { attempts: 3, backoff: { delayMs: 0 } })
class EchoWorkflow {
  async run(input: { key: string; gated?: boolean }, _ctx: RunContext): Promise<string> {
    if (input.gated) await gates.get(input.key).promise;
    return `echo:${input.key}`;
  }
}

const AOF = ['--appendonly', 'yes', '--appendfsync', 'always'];

async function audit(url: string, namespace: string): Promise<void> {
  const redis = new Redis(url);
  try {
    expectConsistent(await auditNamespace(redis, { namespace }));
  } finally {
    redis.disconnect();
  }
}

describe('Redis down, then back', () => {
  let server: RedisProcess | undefined;
  const apps: Array<{ app: TestingModule; close(): Promise<void> }> = [];

  afterEach(async () => {
    gates.openAll();
    await Promise.all(apps.splice(0).map((app) => app.close().catch(() => undefined)));
    await server?.stop();
    server = undefined;
  });

  it('a worker of code that declares nothing boots at once without Redis, however long redisTimeoutMs is', async () => {
    // Its first reserve stands in for its declarations (see WorkerDeclarations.check), and gives up
    // at the first refused connection as they do, rather than waiting out the call bound.
    const startedAt = Date.now();
    const app = await appOn(`redis://127.0.0.1:${await freePort()}`, [EchoWorkflow], {
      namespace: uniqueNamespace('boot-long'),
      redisTimeoutMs: 30_000,
    });
    apps.push(app);
    expect(Date.now() - startedAt).toBeLessThan(5_000);
    expect(await app.app.get(QueueHealth).check(1_000)).toMatchObject({ redis: { up: false }, worker: { state: 'waiting-for-redis' } });
    // One connection waits for Redis: the subscriber opens once the command connection reaches it.
    expect(app.app.get(RedisConnections).subscriber.hasConnection).toBe(false);
  });

  it('a worker app boots without Redis, clients fail fast with a typed error, and both work once Redis starts', async () => {
    const ns = uniqueNamespace('boot');
    const port = await freePort();
    const startedAt = Date.now();
    const app = await appOn(`redis://127.0.0.1:${port}`, [EchoWorkflow], {
      namespace: ns,
      redisTimeoutMs: 1_000,
      worker: { lockMs: 5_000 },
    });
    apps.push(app);
    // Booted (not crashed, not stuck until some timeout): the worker waits for Redis.
    expect(Date.now() - startedAt).toBeLessThan(5_000);
    const health = app.app.get(QueueHealth);
    expect(await health.check()).toMatchObject({ healthy: false, redis: { up: false }, worker: { state: 'waiting-for-redis' } });

    // A producer call during the outage: a typed error within redisTimeoutMs, nothing hangs.
    await expect(app.client.enqueue(EchoWorkflow, { key: 'early' })).rejects.toBeInstanceOf(RedisUnavailableError);
    await expect(app.client.get('nope')).rejects.toBeInstanceOf(RedisConnectionError);
    // Run control too: a typed error within the bound, never a hang.
    await expect(app.client.cancel('nope')).rejects.toBeInstanceOf(RedisConnectionError);
    await expect(app.client.pause({ workflow: EchoWorkflow })).rejects.toBeInstanceOf(RedisConnectionError);
    await expect(app.client.listRuns({ workflow: EchoWorkflow, state: 'failed' })).rejects.toBeInstanceOf(RedisConnectionError);
    await expect(app.client.retry('nope')).rejects.toBeInstanceOf(RedisConnectionError);
    await expect(app.client.timeline('nope')).rejects.toBeInstanceOf(RedisConnectionError);

    server = await RedisProcess.start({ port, args: AOF });
    await pollUntil(
      () => health.check(),
      (report) => report.healthy,
      'the worker to start once Redis is up',
      30_000,
    );
    expect(await app.client.run(EchoWorkflow, { key: 'late' }, { timeoutMs: 20_000 })).toBe('echo:late');
    // The worker's cancel subscription, refused while Redis was away, is in place now.
    const probe = new Redis(server.url);
    try {
      await pollUntil(
        async () => ((await probe.pubsub('NUMSUB', `{sluice:${ns}}:cancel`)) as [string, number])[1],
        (n) => n >= 1,
        'the cancel subscription',
        20_000,
      );
    } finally {
      probe.disconnect();
    }
    await audit(server.url, ns);
  });

  it('a wait outlives an outage (its background re-reads fail quietly), and shutdown after an outage is bounded', async () => {
    server = await RedisProcess.start({ args: AOF });
    const ns = uniqueNamespace('mid');
    const app = await appOn(server.url, [EchoWorkflow], {
      namespace: ns,
      redisTimeoutMs: 1_000,
      worker: { lockMs: 10_000, shutdownTimeoutMs: 500 },
    });
    apps.push(app);
    const handle = await app.client.enqueue(EchoWorkflow, { key: 'w1', gated: true }, { id: 'w1' });
    const result = handle.result();
    let settled = false;
    result.then(
      () => (settled = true),
      () => (settled = true),
    );
    await pollUntil(
      () => app.client.get('w1'),
      (run) => run?.state === 'active',
      'w1 active',
    );
    // The wait's first read has marked the run as waited on: the outage is to meet its later
    // re-reads, not that one (a first read that fails rejects the wait). Its reply came over the
    // connection the get after it uses, so it has been handled once the get answers.
    const raw = new Redis(server.url);
    try {
      await pollUntil(
        () => raw.hget(`{sluice:${ns}}:run:w1`, 'waited'),
        (waited) => waited === '1',
        "the wait's first read",
      );
    } finally {
      raw.disconnect();
    }
    await app.client.get('w1');

    await server.kill('SIGKILL');
    // Longer than the waiter's 10 s backstop, so its re-read meets the outage at least once.
    await new Promise((resolve) => setTimeout(resolve, 11_000));
    expect(settled).toBe(false);
    await server.restart();
    gates.open('w1');
    await expect(result).resolves.toBe('echo:w1');

    // The worker resumed without a restart: a fresh run goes through.
    expect(await app.client.run(EchoWorkflow, { key: 'w2' }, { timeoutMs: 20_000 })).toBe('echo:w2');

    // A second outage, then SIGTERM-like close with a run in flight: bounded, Redis or not.
    await app.client.enqueue(EchoWorkflow, { key: 'w3', gated: true }, { id: 'w3' });
    await pollUntil(
      () => app.client.get('w3'),
      (run) => run?.state === 'active',
      'w3 active',
    );
    await server.kill('SIGKILL');
    const closing = Date.now();
    await app.close();
    expect(Date.now() - closing).toBeLessThan(500 + 6_000);
    await server.restart();
    await audit(server.url, ns);
  });
});
