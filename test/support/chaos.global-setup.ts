import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import globalSetup from './redis.global-setup';

/**
 * Global setup of the fault suite (jest.chaos.config.js): the shared test redis-server (see
 * redis.global-setup.ts), plus a directory of this run only where every RedisProcess a test
 * starts registers itself, so the teardown can kill the ones a failed test left running.
 */
export default async function chaosGlobalSetup(): Promise<void> {
  await globalSetup();
  process.env.SLUICE_CHAOS_RUN_DIR = mkdtempSync(join(tmpdir(), 'sluice-chaos-run-'));
}
