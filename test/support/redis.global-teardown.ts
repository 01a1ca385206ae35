import type { LocalRedis } from './redis-server';

export default async function globalTeardown(): Promise<void> {
  const redis = (globalThis as { __sluiceRedis__?: LocalRedis }).__sluiceRedis__;
  await redis?.stop();
}
