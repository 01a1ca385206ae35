import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { QueueClient, QueueModule } from '../../lib';

/**
 * Boots a producer against a Redis that refuses connections (REDIS_URL), makes one call fail,
 * closes the app and sends { closed: true }; then the process must exit by itself (nothing may
 * keep it alive), which the test times.
 */
async function main(): Promise<void> {
  @Module({
    imports: [
      QueueModule.forRoot({
        connection: { url: process.env.REDIS_URL! },
        namespace: 'close-outage',
        worker: { enabled: false },
        redisTimeoutMs: 1_000,
      }),
    ],
  })
  class ProducerModule {}
  const app = await NestFactory.createApplicationContext(ProducerModule, { logger: false });
  await app
    .get(QueueClient)
    .get('any')
    .catch(() => undefined);
  await app.close();
  process.send!({ closed: true });
  process.disconnect();
}

main().catch((error: Error) => {
  console.error(error.stack);
  process.exit(1);
});
