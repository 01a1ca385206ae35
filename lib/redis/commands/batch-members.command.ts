import type { LuaScripts } from '../lua.scripts';
import type { CallOptions } from '../redis.link';
import type { RedisKeys } from '../redis.keys';

/** A batch's members still to run (lua/batch-members.lua), in enqueue order. */
export interface BatchMembers {
  ids: string[];
  /** Their encoded inputs, by position. */
  inputs: string[];
}

/** Reads the members of batch run `batchId` that are still in it, with their inputs: one read. */
export async function batchMembers(scripts: LuaScripts, keys: RedisKeys, batchId: string, policy: CallOptions): Promise<BatchMembers> {
  const reply = await scripts.run<string[]>('batch-members', [keys.batch(batchId)], [keys.base, batchId], { ...policy, idempotent: true });
  const ids: string[] = [];
  const inputs: string[] = [];
  for (let i = 0; i < reply.length; i += 2) {
    ids.push(reply[i]);
    inputs.push(reply[i + 1]);
  }
  return { ids, inputs };
}
