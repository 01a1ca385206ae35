import { rmSync } from 'node:fs';
import globalTeardown from './redis.global-teardown';
import { killRegisteredServers } from './redis-process';

/** Kills the redis-servers this run's tests left running (see chaos.global-setup.ts), then the shared one. */
export default async function chaosGlobalTeardown(): Promise<void> {
  const runDir = process.env.SLUICE_CHAOS_RUN_DIR;
  if (runDir) {
    const killed = killRegisteredServers(runDir);
    if (killed.length) console.warn(`chaos teardown: killed ${killed.length} redis-server(s) a test left running: ${killed.join(', ')}`);
    rmSync(runDir, { recursive: true, force: true });
  }
  await globalTeardown();
}
