import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** One park announcement (lua/park.lua). */
export interface ParkRequest {
  /** The worker's id in the parked sets, ending in ':<its lease ms>' (a handoff gets that lease). */
  entry: string;
  /** How long the entry stays valid (negative: withdraws it at once). */
  validForMs: number;
  /** The workflows the worker blocks on. */
  workflows: string[];
}

/** Announces a worker parked. Repeating it is harmless; `timeoutMs` bounds the call (default: the link's). */
export async function park(scripts: LuaScripts, keys: RedisKeys, request: ParkRequest, timeoutMs?: number): Promise<void> {
  await scripts.run('park', [keys.leases], [keys.base, request.entry, request.validForMs, ...request.workflows], {
    idempotent: true,
    timeoutMs,
  });
}
