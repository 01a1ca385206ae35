import type { LuaScripts } from '../lua.scripts';
import type { CallOptions } from '../redis.link';
import type { RedisKeys } from '../redis.keys';
import type { LeaseRef } from './save-steps.command';

/** One progress write (lua/progress.lua), stored only while `claim` still holds its run's lease. */
export interface ProgressWrite {
  claim: LeaseRef;
  /** The value, encoded (encodeProgress; never ''). */
  encoded: string;
}

/**
 * Stores a run's latest progress value: true once stored (or already the stored value, so a
 * retry is harmless), false if the lease is gone (nothing written). `policy`: the worker's commitPolicy.
 */
export async function storeProgress(scripts: LuaScripts, keys: RedisKeys, write: ProgressWrite, policy: CallOptions): Promise<boolean> {
  const { claim } = write;
  return (await scripts.run<number>('progress', [keys.run(claim.id)], [keys.base, claim.id, claim.token, write.encoded], policy)) === 1;
}
