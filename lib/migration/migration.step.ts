import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import type { RedisLink } from '../redis/redis.link';

/** What a migration step works with: the namespace's keys, bounded Redis calls, and the lock. */
export interface MigrationContext {
  readonly scripts: LuaScripts;
  /** The command link, for plain bounded reads (SSCAN…); every call through it is bounded. */
  readonly link: RedisLink;
  readonly keys: RedisKeys;
  /** This migration's lock token: every script that writes checks it (see lua/migrate-lock.lua). */
  readonly token: string;
  /** Throws `MigrationLockLostError` if the lock renewals found the lock gone. Call it between batches. */
  checkLock(this: void): void;
}

/**
 * One move of a namespace's data from layout `from` to `from + 1`. It must be idempotent (a
 * step cut short is run again from the start by whichever process migrates next), do its work
 * in bounded script calls (no call may block Redis for long, whatever the data's size), and
 * write only through scripts that check the lock token.
 */
export interface MigrationStep {
  readonly from: number;
  readonly to: number;
  /** One line for the logs. */
  readonly description: string;
  run(context: MigrationContext): Promise<void>;
}
