import { startRedisServer } from './redis-server';

/**
 * Starts one private redis-server for the whole test run unless REDIS_URL points at one.
 * Test files isolate themselves by namespace, so they can share it in parallel.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.REDIS_URL) return;
  const redis = await startRedisServer();
  process.env.REDIS_URL = redis.url;
  (globalThis as { __sluiceRedis__?: unknown }).__sluiceRedis__ = redis;
}
