import 'reflect-metadata';
import { Controller, Get, ServiceUnavailableException } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test, TestingModule } from '@nestjs/testing';
import { QueueHealthCheckError, QueueHealthIndicator, QueueModule, QueueModuleOptions, RunContext, Workflow } from '../../lib';
import { testConnection, uniqueNamespace } from '../support/app';
import { freePort } from '../support/redis-server';

/**
 * `QueueHealthIndicator` with the real `@nestjs/terminus` (a devDependency; an optional peer of
 * the package), and as it behaves where terminus is absent or older (simulated by replacing
 * the module Jest resolves for `require('@nestjs/terminus')` — terminus, not Redis, is faked).
 * The worker-liveness cases (a dead blocking connection) are in test/chaos/health-blocking.spec.ts.
 */

@Workflow('health.echo')
class EchoWorkflow {
  async run(input: string, _ctx: RunContext) {
    return input;
  }
}

/** The controller the docs show. */
@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly queue: QueueHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.queue.isHealthy('sluice', { timeoutMs: 1_000 })]);
  }
}

/** @param connection the test deployment (testConnection) for an app that is up; a free port's URL for one that is down. */
async function boot(connection: QueueModuleOptions['connection'], options: Partial<QueueModuleOptions> = {}): Promise<TestingModule> {
  const app = await Test.createTestingModule({
    imports: [
      TerminusModule.forRoot({ logger: false }),
      QueueModule.forRoot({ connection, namespace: uniqueNamespace('health'), redisTimeoutMs: 1_000, ...options }),
    ],
    controllers: [HealthController],
    providers: [EchoWorkflow],
  }).compile();
  app.useLogger(false);
  await app.init();
  return app;
}

describe('QueueHealthIndicator with @nestjs/terminus', () => {
  const apps: TestingModule[] = [];

  afterEach(async () => {
    jest.dontMock('@nestjs/terminus');
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });

  it('is up in a HealthCheckService report, with Redis and worker details under its key', async () => {
    const app = await boot(testConnection());
    apps.push(app);
    const report = await app.get(HealthController).check();
    expect(report).toEqual({
      status: 'ok',
      info: { sluice: { status: 'up', redis: { up: true }, worker: { state: 'running', lastWakeAt: expect.any(String) } } },
      error: {},
      details: { sluice: expect.objectContaining({ status: 'up' }) },
    });
    expect(new Date((report.info!.sluice!.worker as { lastWakeAt: string }).lastWakeAt).getTime()).toBeGreaterThan(Date.now() - 60_000);
  });

  it('is down (503 from HealthCheckService) when Redis does not answer and the worker waits for it, without throwing itself (the HealthIndicatorService style of terminus ≥ 10.2.2)', async () => {
    const app = await boot({ url: `redis://127.0.0.1:${await freePort()}` });
    apps.push(app);
    const result = await app.get(QueueHealthIndicator).isHealthy('queue', { timeoutMs: 500 });
    expect(result).toEqual({
      queue: {
        status: 'down',
        redis: { up: false, error: expect.stringContaining('not ready in time') },
        worker: { state: 'waiting-for-redis', error: expect.any(String) },
      },
    });

    const failure = await app
      .get(HealthController)
      .check()
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(failure).toBeInstanceOf(ServiceUnavailableException);
    expect((failure as ServiceUnavailableException).getResponse()).toMatchObject({
      status: 'error',
      error: { sluice: { status: 'down', redis: { up: false }, worker: { state: 'waiting-for-redis' } } },
    });
  });

  it('without terminus installed: a plain result when up, a QueueHealthCheckError carrying the same causes when down', async () => {
    jest.doMock('@nestjs/terminus', () => {
      throw Object.assign(new Error("Cannot find module '@nestjs/terminus'"), { code: 'MODULE_NOT_FOUND' });
    });
    const up = await boot(testConnection());
    apps.push(up);
    expect(await up.get(QueueHealthIndicator).isHealthy()).toEqual({
      sluice: { status: 'up', redis: { up: true }, worker: { state: 'running', lastWakeAt: expect.any(String) } },
    });

    const down = await boot({ url: `redis://127.0.0.1:${await freePort()}` }, { worker: { enabled: false } });
    apps.push(down);
    const error = await down
      .get(QueueHealthIndicator)
      .isHealthy('sluice', { timeoutMs: 300 })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(QueueHealthCheckError);
    expect(error).toMatchObject({
      isHealthCheckError: true,
      message: expect.stringMatching(/^Sluice is unhealthy: Redis did not answer/),
      causes: { sluice: { status: 'down', redis: { up: false }, worker: { state: 'disabled' } } },
    });
  });

  it("with a terminus older than 10.2.2 (no HealthIndicatorService): throws terminus's own HealthCheckError", async () => {
    class HealthCheckError extends Error {
      readonly isHealthCheckError = true;
      constructor(
        message: string,
        readonly causes: unknown,
      ) {
        super(message);
      }
    }
    jest.doMock('@nestjs/terminus', () => ({ HealthCheckError }));
    const down = await boot({ url: `redis://127.0.0.1:${await freePort()}` }, { worker: { enabled: false } });
    apps.push(down);
    await expect(down.get(QueueHealthIndicator).isHealthy('q', { timeoutMs: 300 })).rejects.toEqual(
      expect.objectContaining({ constructor: HealthCheckError, causes: { q: expect.objectContaining({ status: 'down' }) } }),
    );
  });
});
