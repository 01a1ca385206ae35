import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** One cap to set or remove at runtime (lua/set-limits.lua), checked by the caller. */
export interface CapRequest {
  /** The limits hash field the cap is stored in, as `limitField` names it. */
  field: string;
  /** The cap; null removes it. */
  limit: number | null;
  /** The workflow the field concerns; absent for the namespace. */
  workflow?: string;
  /** The group the field concerns, '*' for every group's default; absent for none. */
  group?: string;
}

/** lua/set-limits.lua's reply. */
export interface CapReply {
  /** The cap it replaced; null if there was none. */
  previous: number | null;
  /**
   * For every group's default only: where the visit of the workflow's groups stopped, for
   * `activateGroups` to go on from; null once every group was visited.
   */
  groupsCursor: string | null;
}

/**
 * Sets or removes one fleet-wide cap. Not sent again after a lost reply: its repeat would reply
 * the cap it set itself as the previous one.
 */
export async function writeCap(scripts: LuaScripts, keys: RedisKeys, request: CapRequest): Promise<CapReply> {
  const [previous, cursor] = await scripts.run<[string, string]>(
    'set-limits',
    [keys.limits, keys.seq],
    [keys.base, request.field, request.limit ?? '', request.workflow ?? '', request.group ?? ''],
  );
  return { previous: previous === '' ? null : Number(previous), groupsCursor: cursor === '0' ? null : cursor };
}
