import 'reflect-metadata';
import { Provider } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { randomBytes } from 'node:crypto';
import Redis from 'ioredis';
import { QueueClient, QueueModule, QueueModuleOptions } from '../../lib';

export function redisUrl(): string {
  const url = process.env.REDIS_URL;
  if (!url) throw new Error('REDIS_URL is not set: run tests through jest (its global setup starts redis-server)');
  return url;
}

/** A namespace no other test uses, so test files share one Redis safely and in parallel. */
export function uniqueNamespace(label = 't'): string {
  return `${label}-${randomBytes(4).toString('hex')}`;
}

export interface TestApp {
  app: TestingModule;
  client: QueueClient;
  close(): Promise<void>;
}

/** A real Nest application with QueueModule on the test Redis, initialised (workers started). */
export async function createApp(providers: Provider[], options: Partial<QueueModuleOptions> & { namespace: string }): Promise<TestApp> {
  const app = await Test.createTestingModule({
    imports: [QueueModule.forRoot({ connection: { url: redisUrl() }, ...options })],
    providers,
  }).compile();
  app.useLogger(process.env.SLUICE_TEST_LOGS ? ['log', 'warn', 'error'] : false);
  await app.init();
  return { app, client: app.get(QueueClient), close: () => app.close() };
}

/** A plain connection for assertions on raw Redis state. */
export function rawRedis(): Redis {
  return new Redis(redisUrl());
}

/** Deletes every key of a test namespace (only keys this test created). */
export async function dropNamespace(redis: Redis, namespace: string, prefix = 'sluice'): Promise<void> {
  const pattern = `{${prefix}:${namespace}}:*`;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    if (keys.length) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}
