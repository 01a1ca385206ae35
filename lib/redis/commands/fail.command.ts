import type { LuaScripts } from '../lua.scripts';
import type { CallOptions } from '../redis.link';
import type { RedisKeys } from '../redis.keys';
import type { LeaseRef } from './save-steps.command';

/** One fail call (lua/fail.lua): a failed attempt, recorded only while `claim` still holds its lease. */
export interface FailRequest {
  claim: LeaseRef;
  /** The error as JSON `{ name, message, stack }` (describeError), stored with the run. */
  error: string;
  /** Whether the run may have another attempt (it gets one while attempts remain). */
  retryable: boolean;
  /** Backoff before the next attempt, in ms (0: due again at once). */
  delayMs: number;
  /** How long a run failed for good keeps its record, in ms. */
  retentionMs: number;
  /** The attempt's journal '<slot> <json>', or '' (AttemptJournal.encode). */
  journal: string;
}

/**
 * What a fail call found or did: 'retry' (another attempt is due, after the backoff), 'failed'
 * (for good), 'lost' (the lease was gone: nothing written). A retry of a call whose attempt had
 * already ended under the same token answers how it ended: 'retry' or 'failed' (this call's
 * own landing, its reply lost), 'suspended' (a wait), 'continued' (continueAsNew), 'released'
 * (a hand-back).
 */
export type FailOutcome = 'retry' | 'failed' | 'lost' | 'suspended' | 'continued' | 'released';

/**
 * Records a failed attempt. `policy`: the worker's commitPolicy (the script recognises its own
 * earlier landing by token, so a retry is harmless). Sent even after a lost lease: the token decides.
 */
export async function fail(scripts: LuaScripts, keys: RedisKeys, request: FailRequest, policy: CallOptions): Promise<FailOutcome> {
  const { claim } = request;
  const runKeys = [keys.run(claim.id), keys.leases, keys.limits, keys.seq];
  const args = [
    keys.base,
    claim.id,
    claim.token,
    request.error,
    request.retryable ? 1 : 0,
    request.delayMs,
    request.retentionMs,
    request.journal,
  ];
  return scripts.run<FailOutcome>('fail', runKeys, args, policy);
}
