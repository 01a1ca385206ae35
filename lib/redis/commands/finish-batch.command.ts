import type { LuaScripts } from '../lua.scripts';
import type { CallOptions } from '../redis.link';
import type { RedisKeys } from '../redis.keys';
import type { LeaseRef } from './save-steps.command';

/** How a batch attempt ended, for lua/finish-batch.lua. */
export type BatchOutcome =
  /** Per member the attempt ran: its id and encoded result. */
  | { kind: 'completed'; members: Array<[id: string, result: string]> }
  | { kind: 'failed'; error: string; retryable: boolean; delayMs: number };

/** What the call did: 'lost' = the lease was gone, nothing written. */
export type BatchFinish = 'completed' | 'retry' | 'failed' | 'lost';

/**
 * Commits a batch attempt's outcome with its members', in one token-checked script call (see
 * lua/finish-batch.lua). `policy`: the worker's commitPolicy (a retry after a lost reply finds
 * its own landing by token, so it is harmless).
 */
export function finishBatch(
  scripts: LuaScripts,
  keys: RedisKeys,
  request: { claim: LeaseRef; retentionMs: number; journal: string; outcome: BatchOutcome },
  policy: CallOptions,
): Promise<BatchFinish> {
  const { claim, outcome } = request;
  const args: (string | number)[] = [keys.base, claim.id, claim.token, request.retentionMs, request.journal, outcome.kind];
  if (outcome.kind === 'completed') for (const [id, result] of outcome.members) args.push(id, result);
  else args.push(outcome.error, outcome.retryable ? 1 : 0, outcome.delayMs);
  return scripts.run<BatchFinish>('finish-batch', [keys.run(claim.id), keys.batch(claim.id)], args, policy);
}
