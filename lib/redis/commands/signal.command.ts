import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** One signal to one run (lua/signal.lua), checked by the caller. */
export interface SignalRequest {
  runId: string;
  name: string;
  /** The encoded payload ('' = undefined). */
  payload: string;
  /** Signals the run's mailbox holds at most (MAX_MAILBOX). */
  mailboxBound: number;
}

/** What a signal did. */
export interface SignalReply {
  /**
   * 'delivered': the run was waiting for it and resumes; 'queued': it went to the run's mailbox;
   * 'full': the mailbox was full, nothing stored; 'missing': no such run; 'finished': the run had
   * finished, nothing stored.
   */
  outcome: 'delivered' | 'queued' | 'full' | 'missing' | 'finished';
  /** The run's state ('' if missing). */
  state: string;
}

/**
 * Delivers a signal to one run. Not sent again after a lost reply (a repeat could queue the
 * signal twice): the caller gets an OutcomeUnknownError.
 */
export async function sendSignal(scripts: LuaScripts, keys: RedisKeys, request: SignalRequest): Promise<SignalReply> {
  const { runId } = request;
  const [outcome, state] = await scripts.run<[SignalReply['outcome'], string]>(
    'signal',
    [keys.run(runId), keys.limits, keys.seq],
    [keys.base, runId, request.name, request.payload, request.mailboxBound],
  );
  return { outcome, state };
}
