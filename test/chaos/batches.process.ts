import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { QueueModule } from '../../lib';
import { ChaosBatch } from './batches.workflows';

/**
 * A Sluice worker in its own OS process for test/chaos/batches.spec.ts (forked through
 * ChildWorker), running the batch workflow of batches.workflows.ts.
 *
 * env: REDIS_URL, NS, FX_DIR, BATCH_HOLD, CONCURRENCY, LOCK_MS, STALLED_INTERVAL_MS.
 * IPC out: { ready: true } once its workers run; { held, members } per batch it holds.
 */
async function main(): Promise<void> {
  @Module({
    imports: [
      QueueModule.forRoot({
        connection: { url: process.env.REDIS_URL! },
        namespace: process.env.NS!,
        worker: {
          concurrency: Number(process.env.CONCURRENCY ?? 10),
          lockMs: Number(process.env.LOCK_MS ?? 500),
          stalledIntervalMs: Number(process.env.STALLED_INTERVAL_MS ?? 250),
        },
      }),
    ],
    providers: [ChaosBatch],
  })
  class ChildModule {}

  await NestFactory.createApplicationContext(ChildModule, { logger: process.env.SLUICE_TEST_LOGS ? ['log', 'warn', 'error'] : ['error'] });
  // The test process went away: do not linger as an orphan.
  process.on('disconnect', () => process.exit(2));
  process.send?.({ ready: true });
}

main().catch((error: Error) => {
  console.error(`batch worker ${process.pid} failed: ${error.stack}`);
  process.exit(1);
});
