import { rmSync } from 'node:fs';
import type { LocalRedis } from './redis-server';
import { aclDenials, secureAdmin, testTls, userName } from './secure';

/**
 * Fails the run if Redis refused the suite's `app` user anything (ACL LOG): the e2e specs' apps
 * hold exactly the documented rules, and a refusal in the background (a worker's loop) would fail
 * no test by itself. Then stops the secure suite's server and removes its certificates (see
 * secure.global-setup.ts).
 */
export default async function secureGlobalTeardown(): Promise<void> {
  const secure = (globalThis as { __sluiceSecure__?: { redis: LocalRedis; dir: string } }).__sluiceSecure__;
  if (!secure) return;
  try {
    const admin = secureAdmin(testTls()!);
    const denials = await aclDenials(admin, [userName('app')]).finally(() => admin.disconnect());
    if (denials.length > 0) throw new Error(`Redis refused the app user of the secure suite:\n${denials.join('\n')}`);
  } finally {
    await secure.redis.stop();
    rmSync(secure.dir, { recursive: true, force: true });
  }
}
