import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** What a retry of one run found (lua/retry.lua, mode 'one'). */
export interface RetryOne {
  /** 'retried': it is waiting now; 'missing': no such run; 'state': not failed nor cancelled, left alone. */
  outcome: 'retried' | 'missing' | 'state';
  /** The state it was retried from ('retried'), or is in ('state'); '' if missing. */
  state: string;
}

/** One batch of a retry of a workflow's failed or cancelled runs (lua/retry.lua, mode 'batch'). */
export interface RetryBatchRequest {
  workflow: string;
  /** The finish index to take the runs from. */
  state: 'failed' | 'cancelled';
  /** Runs to retry at most (1..500). */
  max: number;
  /** The previous batch's `bound`, or '' for the first batch (it fixes the bound). */
  bound: string;
}

/** What one batch did. */
export interface RetryBatch {
  retried: number;
  /** The highest finish score taken, for the next batch; '' if the index was empty. */
  bound: string;
  /** Whether entries remain under the bound. */
  more: boolean;
}

// Neither call is sent again after a lost reply: a repeat would find the run waiting (or take
// the next runs of the batch) and misreport what the first try did.

/** Puts one failed or cancelled run back to waiting. */
export async function retryRun(scripts: LuaScripts, keys: RedisKeys, runId: string): Promise<RetryOne> {
  const [outcome, state] = await scripts.run<[RetryOne['outcome'], string]>(
    'retry',
    [keys.limits, keys.seq, keys.run(runId)],
    [keys.base, 'one', runId],
  );
  return { outcome, state };
}

/** Puts the oldest runs of a finish index, up to the bound the first batch fixed, back to waiting. */
export async function retryBatch(scripts: LuaScripts, keys: RedisKeys, request: RetryBatchRequest): Promise<RetryBatch> {
  const { workflow, state } = request;
  const [retried, bound, more] = await scripts.run<[number, string, number]>(
    'retry',
    [keys.limits, keys.seq, keys.finished(workflow, state)],
    [keys.base, 'batch', workflow, state, request.max, request.bound],
  );
  return { retried, bound, more: more !== 0 };
}
