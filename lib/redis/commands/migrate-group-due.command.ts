import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** One 'count' call's answer (lua/migrate-group-due.lua); `held: false`: the token lost the lock, nothing written. */
export type GroupDueBatch =
  | { held: false }
  /** `stored`: the workflow's groups fit this one call, which stored the count: done. */
  | { held: true; stored: true }
  /** `next`: the SSCAN cursor to go on from ('0' = done); `groups`: the due runs of each group visited (a group may come twice). */
  | { held: true; stored: false; next: string; groups: Array<[group: string, due: number]> };

const keysOf = (keys: RedisKeys, workflow: string) => [keys.migrateLock, keys.workflow(workflow, 'stats')];

/** Counts the due runs of one batch of `workflow`'s group lanes, from `cursor` ('0' to start). Repeatable. */
export async function countGroupDue(
  scripts: LuaScripts,
  keys: RedisKeys,
  token: string,
  workflow: string,
  cursor: string,
): Promise<GroupDueBatch> {
  const reply = await scripts.run<unknown[]>('migrate-group-due', keysOf(keys, workflow), [keys.base, token, workflow, 'count', cursor], {
    idempotent: true,
  });
  if (reply[0] !== 1) return { held: false };
  if (reply[2] === 1) return { held: true, stored: true };
  const groups: Array<[string, number]> = [];
  for (let i = 3; i < reply.length; i += 2) groups.push([String(reply[i]), Number(reply[i + 1])]);
  return { held: true, stored: false, next: String(reply[1]), groups };
}

/** Stores `total` as `workflow`'s count of due grouped runs; whether the token held the lock (else nothing written). Repeatable. */
export async function writeGroupDue(
  scripts: LuaScripts,
  keys: RedisKeys,
  token: string,
  workflow: string,
  total: number,
): Promise<boolean> {
  const [held] = await scripts.run<number[]>('migrate-group-due', keysOf(keys, workflow), [keys.base, token, workflow, 'write', total], {
    idempotent: true,
  });
  return held === 1;
}
