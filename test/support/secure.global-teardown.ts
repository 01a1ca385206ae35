import { rmSync } from 'node:fs';
import type { LocalRedis } from './redis-server';

/** Stops the secure suite's server and removes its certificates (see secure.global-setup.ts). */
export default async function secureGlobalTeardown(): Promise<void> {
  const secure = (globalThis as { __sluiceSecure__?: { redis: LocalRedis; dir: string } }).__sluiceSecure__;
  if (!secure) return;
  try {
    await secure.redis.stop();
  } finally {
    rmSync(secure.dir, { recursive: true, force: true });
  }
}
