import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/**
 * Runs one cancel call visits at most (the run and the children it cascades to): a call is short
 * whatever the tree, and the caller calls again until its cascade is done (see lua/cancel.lua).
 */
export const CANCEL_BATCH = 250;
/**
 * How long another run's cascade must have stood still before a cancel call with budget to spare
 * carries it on: its caller went away (a crash between two calls). A live caller calls again
 * within a round trip, so its own count of `children` stays exact.
 */
export const CASCADE_IDLE_MS = 10_000;

/** One cancel call's reply (lua/cancel.lua). */
export interface CancelBatch {
  outcome: 'cancelled' | 'finished' | 'missing';
  /** The state the call found the run in ('' if missing; a durable wait's kind for a run in one). */
  state: string;
  /** Runs of its cascade this call cancelled. */
  cascaded: number;
  /** Runs of its cascade still to visit (0: done). */
  left: number;
}

/** What a cancel records: the error stored with each run it ends, and the reason the workers are told. */
export interface CancelRecord {
  error: string;
  reason: string;
  retentionMs: number;
}

/**
 * The one place that builds lua/cancel.lua's KEYS and ARGV: a call cancels `runId` (or finds it
 * finished) and visits at most {@link CANCEL_BATCH} runs of its cascade. Sent again after a lost
 * reply (the script is idempotent); `onRepeat` tells whether this call was such a repeat.
 */
export async function sendCancel(
  scripts: LuaScripts,
  keys: RedisKeys,
  runId: string,
  record: CancelRecord,
  onRepeat?: (repeat: boolean) => void,
): Promise<CancelBatch> {
  const runKeys = [keys.run(runId), keys.leases, keys.limits, keys.seq, keys.cascade(runId), keys.cascades];
  const args = [keys.base, runId, record.error, record.reason, record.retentionMs, CANCEL_BATCH, CASCADE_IDLE_MS];
  const [outcome, state, cascaded, left] = await scripts.run<[CancelBatch['outcome'], string, number, number]>(
    'cancel',
    runKeys,
    (repeat) => (onRepeat?.(repeat), args),
    { idempotent: true },
  );
  return { outcome, state, cascaded: Number(cascaded), left: Number(left) };
}

/** The error recorded on a cancelled run, as lua/cancel.lua stores it. */
export function cancelledErrorJson(reason: string): string {
  return JSON.stringify({ name: 'RunCancelledError', message: reason ? `cancelled: ${reason}` : 'cancelled', ...(reason && { reason }) });
}
