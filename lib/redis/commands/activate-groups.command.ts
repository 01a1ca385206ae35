import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/**
 * After every group's default cap of a workflow was raised or removed: visits the workflow's
 * groups in batches (lua/activate-groups.lua, about 500 groups a call, so no call blocks Redis
 * for long however many groups there are), and each group the old cap held back rejoins the
 * round-robin with its new slots. Starts from the beginning, or from `cursor`, where set-limits
 * stopped; resolves once every group was visited.
 */
export async function activateGroups(scripts: LuaScripts, keys: RedisKeys, workflow: string, cursor?: string): Promise<void> {
  const visit = (from: string) => scripts.run<string>('activate-groups', [keys.limits, keys.seq], [keys.base, workflow, from]);
  let next = cursor ?? (await visit('0'));
  while (next !== '0') next = await visit(next);
}
