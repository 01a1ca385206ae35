import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import Redis from 'ioredis';
import { AppModule, SAMPLE_NAMESPACE } from './app.module';
import { HealthDemo } from './health.demo';
import { OrderDemo } from './order.demo';
import { ScheduleDemo } from './schedule.demo';
import { RunControlDemo } from './run-control.demo';
import { ApprovalDemo } from './approval.demo';
import { DashboardDemo } from './dashboard.demo';
import { DedupeDemo } from './dedupe.demo';
import { TriggersDemo } from './triggers.demo';
import { BatchDemo } from './batch.demo';

/** Runs the demo against REDIS_URL; resolves 0 if everything happened as expected, 1 otherwise. */
export async function main(): Promise<number> {
  const logger = new Logger('Sample');
  const url = process.env.REDIS_URL;
  if (!url) {
    logger.error('REDIS_URL is not set (`npm run sample` starts a local redis-server for you)');
    return 1;
  }
  await dropSampleKeys(url);
  // An HTTP app (Express) for the dashboard; SAMPLE_PORT picks its port (default: any free one).
  const app = await NestFactory.create(AppModule, { logger: ['log', 'warn', 'error'] });
  await app.listen(Number(process.env.SAMPLE_PORT ?? 0), '127.0.0.1');
  let problems: string[];
  try {
    problems = await app.get(OrderDemo).runAll();
    problems.push(...(await app.get(ScheduleDemo).runAll())); // the stock report has been firing meanwhile
    problems.push(...(await app.get(HealthDemo).runAll())); // the worker has been under load, and still runs
    problems.push(...(await app.get(RunControlDemo).runAll()));
    problems.push(...(await app.get(ApprovalDemo).runAll()));
    problems.push(...(await app.get(TriggersDemo).runAll()));
    problems.push(...(await app.get(DashboardDemo).runAll(await app.getUrl())));
    problems.push(...(await app.get(DedupeDemo).runAll()));
    problems.push(...(await app.get(BatchDemo).runAll()));
    if (process.env.SAMPLE_KEEP_OPEN === '1') await keepOpen(logger, `${await app.getUrl()}/sluice`);
  } finally {
    await app.close(); // stops reserving, lets in-flight runs finish, closes the Redis connections
  }
  if (problems.length > 0) {
    logger.error(`${problems.length} check(s) failed:\n  - ${problems.join('\n  - ')}`);
    return 1;
  }
  logger.log('All checks passed');
  return 0;
}

/** Keeps the app up (dashboard, workers) until Ctrl-C. */
function keepOpen(logger: Logger, url: string): Promise<void> {
  logger.log(`SAMPLE_KEEP_OPEN=1: the dashboard stays at ${url} until you press Ctrl-C`);
  return new Promise((resolve) => process.once('SIGINT', () => resolve()));
}

/** Deletes the keys of the sample's namespace only (`{sluice:sample}:*`), so re-runs start clean. */
async function dropSampleKeys(url: string): Promise<void> {
  const redis = new Redis(url, { lazyConnect: true });
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `{sluice:${SAMPLE_NAMESPACE}}:*`, 'COUNT', 1000);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
