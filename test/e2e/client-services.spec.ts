import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import type Redis from 'ioredis';
import { QueueAdmin, QueueClient, QueueModule, QueueSchedules, RunContext, Workflow } from '../../lib';
import { dropNamespace, rawRedis, testConnection, uniqueNamespace } from '../support/app';

@Workflow('services.echo')
class EchoWorkflow {
  async run(input: { value: number }, _ctx: RunContext): Promise<number> {
    return input.value;
  }
}

/** A provider of the app's own module: what QueueModule exports (it is global) is injected here. */
@Injectable()
class Operations {
  constructor(
    readonly client: QueueClient,
    readonly admin: QueueAdmin,
    readonly schedules: QueueSchedules,
  ) {}
}

@Module({ providers: [Operations] })
class OperationsModule {}

describe('QueueAdmin and QueueSchedules beside QueueClient', () => {
  let redis: Redis;
  const namespaces: string[] = [];

  beforeAll(() => {
    redis = rawRedis();
  });
  afterAll(async () => {
    for (const namespace of namespaces) await dropNamespace(redis, namespace);
    await redis.quit();
  });

  async function start(module: 'forRoot' | 'forRootAsync'): Promise<TestingModule> {
    const namespace = uniqueNamespace('services');
    namespaces.push(namespace);
    const options = { connection: testConnection(), namespace };
    const queue = module === 'forRoot' ? QueueModule.forRoot(options) : QueueModule.forRootAsync({ useFactory: async () => options });
    const app = await Test.createTestingModule({ imports: [queue, OperationsModule], providers: [EchoWorkflow] }).compile();
    app.useLogger(false);
    await app.init();
    return app;
  }

  it.each(['forRoot', 'forRootAsync'] as const)(
    '%s: the three services are injected into an app provider, and act on one namespace',
    async (module) => {
      const app = await start(module);
      try {
        const { client, admin, schedules } = app.get(Operations);
        expect(app.get(QueueAdmin)).toBe(admin);
        expect(app.get(QueueSchedules)).toBe(schedules);

        // What the admin service changes, the client reads, and the other way round.
        await expect(admin.pause({ workflow: EchoWorkflow })).resolves.toBe(true);
        await expect(client.pause({ workflow: EchoWorkflow })).resolves.toBe(false);
        const delayed = await client.enqueue(EchoWorkflow, { value: 1 }, { delayMs: '1h' });
        await expect(admin.cancel(delayed.id)).resolves.toMatchObject({ cancelled: true, state: 'delayed' });
        await expect(client.get(delayed.id)).resolves.toMatchObject({ state: 'cancelled' });
        await expect(client.resume({ workflow: EchoWorkflow })).resolves.toBe(true);
        await expect(client.run(EchoWorkflow, { value: 7 }, { timeoutMs: 10_000 })).resolves.toBe(7);
        await expect(admin.setLimits({ workflow: 'services.echo', limit: 3 })).resolves.toBeNull();
        await expect(client.getLimits({ workflow: 'services.echo' })).resolves.toMatchObject({ workflow: 3 });

        const info = await schedules.set('nightly', EchoWorkflow, { cron: '0 3 * * *', input: { value: 2 } });
        expect(info).toMatchObject({ id: 'nightly', workflow: 'services.echo', paused: false });
        await expect(client.getSchedule('nightly')).resolves.toMatchObject({ id: 'nightly' });
        await expect(schedules.pause('nightly')).resolves.toMatchObject({ paused: true });
        await expect(client.listSchedules()).resolves.toMatchObject({
          schedules: [expect.objectContaining({ id: 'nightly', paused: true })],
        });
        await expect(client.unschedule('nightly')).resolves.toBe(true);
        await expect(schedules.get('nightly')).resolves.toBeNull();
      } finally {
        await app.close();
      }
    },
  );
});
