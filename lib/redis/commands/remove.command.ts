import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** What a remove found (lua/remove.lua). */
export interface RemoveReply {
  /** 'removed': deleted; 'missing': no such run; 'state': not finished, left alone. */
  outcome: 'removed' | 'missing' | 'state';
  /** The state it was removed in ('removed'), or is in ('state'); '' if missing. */
  state: string;
}

/**
 * Deletes a finished run. Not sent again after a lost reply: a repeat would find it missing and
 * misreport what the first try did.
 */
export async function removeRun(scripts: LuaScripts, keys: RedisKeys, runId: string): Promise<RemoveReply> {
  const [outcome, state] = await scripts.run<[RemoveReply['outcome'], string]>('remove', [keys.run(runId)], [keys.base, runId]);
  return { outcome, state };
}
