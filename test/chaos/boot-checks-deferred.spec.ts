import 'reflect-metadata';
import { Test, TestingModule } from '@nestjs/testing';
import { QueueClient, QueueHealth, QueueModule, QueueModuleOptions, RunContext, Workflow } from '../../lib';
import { uniqueNamespace } from '../support/app';
import { LogCapture } from '../support/log-capture';
import { RedisProcess } from '../support/redis-process';
import { freePort } from '../support/redis-server';
import { pollUntil } from '../support/workflows';

/**
 * The boot checks when Redis is down at bootstrap: the app boots at once as before, and the checks
 * run when Redis answers, before the deferred migration and worker start. A server they refuse
 * then (strict and an allkeys-* policy) keeps the worker from starting, says so once as an error,
 * and shows in health; one they only warn about lets it start after the warning.
 */
jest.setTimeout(60_000);

@Workflow('deferred.echo')
class EchoWorkflow {
  async run(input: string, _ctx: RunContext) {
    return input;
  }
}

describe('boot checks deferred by a Redis that is down at bootstrap', () => {
  let server: RedisProcess | undefined;
  let app: TestingModule | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
    await server?.stop();
    server = undefined;
  });

  async function bootWithoutRedis(port: number, options: Partial<QueueModuleOptions>): Promise<{ logs: LogCapture; app: TestingModule }> {
    const logs = new LogCapture();
    const started = Date.now();
    app = await Test.createTestingModule({
      imports: [
        QueueModule.forRoot({
          connection: { url: `redis://127.0.0.1:${port}` },
          namespace: uniqueNamespace('deferred'),
          redisTimeoutMs: 1_000,
          ...options,
        }),
      ],
      providers: [EchoWorkflow],
    }).compile();
    app.useLogger(logs);
    await app.init();
    // Not blocked by the checks: the bootstrap gives up on Redis at its first connection error.
    expect(Date.now() - started).toBeLessThan(3_000);
    return { logs, app };
  }

  it('strict: the worker never starts on an allkeys-lru server that appears later; one error line, and health says why', async () => {
    const port = await freePort();
    const { logs, app: booted } = await bootWithoutRedis(port, { strict: true });
    const health = booted.get(QueueHealth);
    expect(await health.check(500)).toMatchObject({ healthy: false, worker: { state: 'waiting-for-redis' } });

    server = await RedisProcess.start({ port, args: ['--maxmemory-policy', 'allkeys-lru'] });
    const report = await pollUntil(
      () => health.check(1_000),
      (r) => r.redis.up && /refused because strict is true/.test(r.worker.error ?? ''),
      'the refusal to show in health',
      30_000,
    );
    expect(report).toMatchObject({ healthy: false, worker: { state: 'waiting-for-redis' } });
    expect(
      logs.find('error', /^Redis maxmemory-policy is allkeys-lru .*refused because strict is true; the worker will not start$/),
    ).toHaveLength(1);
    expect(logs.find('log', 'Worker started')).toHaveLength(0);
  });

  it('not strict: the warning comes when Redis does, then the worker starts and runs', async () => {
    const port = await freePort();
    const { logs, app: booted } = await bootWithoutRedis(port, {});
    server = await RedisProcess.start({ port, args: ['--maxmemory-policy', 'allkeys-lfu'] });
    await pollUntil(
      () => booted.get(QueueHealth).check(1_000),
      (r) => r.healthy,
      'the worker to start',
      30_000,
    );
    expect(logs.find('warn', /^Redis maxmemory-policy is allkeys-lfu/)).toHaveLength(1);
    expect(await booted.get(QueueClient).run(EchoWorkflow, 'late', { timeoutMs: 10_000 })).toBe('late');
  });
});
