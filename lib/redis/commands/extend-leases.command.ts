import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';
import type { LeaseRef } from './save-steps.command';

/** A lease the worker no longer holds (lua/extend-leases.lua). */
export interface LostLease {
  runId: string;
  /** Tells a stale attempt from a newer one of the same run in the same process. */
  token: string;
  /** The run was cancelled (else another worker took it over, or it is gone). */
  cancelled: boolean;
  /** A cancelled run's recorded error JSON (its reason), else ''. */
  error: string;
}

/**
 * Pushes out the leases of `runs` by `lockMs`, each if its token still holds it; replies the
 * ones lost. Repeating it is harmless; `timeoutMs` bounds the call.
 */
export async function extendLeases(
  scripts: LuaScripts,
  keys: RedisKeys,
  runs: LeaseRef[],
  lockMs: number,
  timeoutMs: number,
): Promise<LostLease[]> {
  const args = runs.flatMap((run) => [run.id, run.token]);
  const flat = await scripts.run<string[]>('extend-leases', [keys.leases], [keys.base, lockMs, ...args], { idempotent: true, timeoutMs });
  const lost: LostLease[] = [];
  for (let i = 0; i < flat.length; i += 4)
    lost.push({ runId: flat[i], token: flat[i + 1], cancelled: flat[i + 2] === 'cancelled', error: flat[i + 3] });
  return lost;
}
