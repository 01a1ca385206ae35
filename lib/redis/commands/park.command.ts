import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';
import type { RedisLink } from '../redis.link';

/** One park announcement (lua/park.lua). */
export interface ParkRequest {
  /** The worker's id in the parked sets, ending in ':<its lease ms>' (a handoff gets that lease). */
  entry: string;
  /** How long the entry stays valid. */
  validForMs: number;
  /** The workflows the worker blocks on. */
  workflows: string[];
}

/** Announces a worker parked. Repeating it is harmless. */
export async function park(scripts: LuaScripts, keys: RedisKeys, request: ParkRequest): Promise<void> {
  await scripts.run('park', [keys.leases], [keys.base, request.entry, request.validForMs, ...request.workflows], { idempotent: true });
}

/**
 * Withdraws a worker's park announcement (it stops): its entry leaves each workflow's parked set,
 * so no enqueue hands it a run from then on. Plain ZREMs, not a park call with a lapsed expiry:
 * the script call costs Redis several times a ZREM's work, and leaves a dead entry for a sweep.
 * Sent over the command connection after any park call of the worker, so it runs after them.
 */
export async function withdrawPark(
  link: RedisLink,
  keys: RedisKeys,
  entry: string,
  workflows: string[],
  timeoutMs?: number,
): Promise<void> {
  await link.call(
    'withdraw the park announcement',
    (redis) => Promise.all(workflows.map((wf) => redis.zrem(keys.workflow(wf, 'parked'), entry))),
    {
      idempotent: true,
      timeoutMs,
    },
  );
}
