import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/**
 * Rebuilds the derived schedule index of the next batch of schedule ids after `cursor` ('' to
 * start), lua/migrate-schedule-index.lua. `held: false`: the token lost the lock, nothing
 * written; else `next` ('' = done). Repeatable.
 */
export async function migrateScheduleIndex(
  scripts: LuaScripts,
  keys: RedisKeys,
  token: string,
  cursor: string,
): Promise<{ held: boolean; next: string }> {
  const [held, next] = await scripts.run<[number, string]>(
    'migrate-schedule-index',
    [keys.migrateLock, keys.schedules],
    [keys.base, token, cursor],
    { idempotent: true },
  );
  return { held: held === 1, next };
}
