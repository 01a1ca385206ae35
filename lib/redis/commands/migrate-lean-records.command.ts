import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** Keys one call looks at: bounds the time a batch blocks Redis whatever the namespace's size. */
const SCAN_COUNT = 500;

/**
 * Rewrites the run records of one SCAN page as lean records (lua/migrate-lean-records.lua), from
 * `cursor` ('0' to start). `held: false`: the token lost the lock, nothing written; else `next`
 * ('0' = done). Repeatable.
 */
export async function migrateLeanRecords(
  scripts: LuaScripts,
  keys: RedisKeys,
  token: string,
  cursor: string,
): Promise<{ held: boolean; next: string }> {
  const [held, next] = await scripts.run<[number, string]>(
    'migrate-lean-records',
    [keys.migrateLock],
    [token, cursor, `${globEscape(keys.base)}run:*`, SCAN_COUNT],
    { idempotent: true },
  );
  return { held: held === 1, next: next ?? '0' };
}

/** `text` matched literally by a SCAN pattern. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}
