import type { LuaScripts } from '../lua.scripts';
import type { CallOptions } from '../redis.link';
import type { RedisKeys } from '../redis.keys';
import { type Claim, CLAIM_EXTRAS, parseClaims } from './claim.reply';
import type { LeaseRef, StepWrite } from './save-steps.command';

/** A finished run's result, written only while `claim` still holds its lease. */
export interface RunCompletion {
  claim: LeaseRef;
  /** The encoded result ('' = undefined). */
  encoded: string;
  /** The attempt's journal '<slot> <json>', or '' (AttemptJournal.encode). */
  journal: string;
}

/** One complete call (lua/complete.lua): a batch of completions and steps, and the refill of the slots they free. */
export interface CompleteRequest {
  /** The call's id: its retry gets back the runs it claimed (see replayClaims in lua/includes/claim.lua). */
  callId: string;
  resultTtlMs: number;
  /** Runs to claim into the freed slots (0: none). */
  claim: number;
  /** Lease length of the runs claimed. */
  lockMs: number;
  /** Added to the retry flag: CLAIM_EXTRAS for the telemetry extras on each claim, else 0. */
  extras: number;
  /** The caller's park announcement, made here if the refill comes up short (see lua/complete.lua). */
  park?: { entry: string; ttlMs: number };
  /**
   * The caller's process inbox (RunInbox), whose waits the caller tells itself of the runs this
   * call completes: Redis does not announce them there (see lua/complete.lua).
   */
  localInbox?: string;
  /** The workflows to claim from, rotated by the caller. */
  workflows: string[];
  steps: StepWrite[];
  completions: RunCompletion[];
}

export interface CompleteResult {
  /** Per completion: true once committed, false if its lease was lost (nothing written). */
  completed: boolean[];
  /** Per step: true once saved, false if its lease was lost. */
  saved: boolean[];
  /** Whether the call announced the caller parked. */
  parked: boolean;
  claims: Claim[];
}

/**
 * Sends one complete call; `policy`: the worker's commitPolicy (every commit recognises its own
 * earlier landing by token, and the refill its claims by call id, so a retry is harmless).
 */
export async function complete(
  scripts: LuaScripts,
  keys: RedisKeys,
  request: CompleteRequest,
  policy: CallOptions,
): Promise<CompleteResult> {
  const { workflows, steps, completions, park } = request;
  // Built with pushes, in one array: the call carries four values per run (up to 32 runs).
  const rest: (string | number)[] = [workflows.length, ...workflows, steps.length];
  for (const { claim, key, encoded } of steps) rest.push(claim.id, claim.token, key, encoded);
  for (const { claim, encoded, journal } of completions) rest.push(claim.id, claim.token, encoded, journal);
  const callKeys = [keys.call(request.callId)];
  const reply = await scripts.run<unknown[] | string>(
    'complete',
    callKeys,
    (retry) => [
      keys.base,
      request.resultTtlMs,
      request.claim,
      request.lockMs,
      (retry ? 1 : 0) + request.extras,
      park?.entry ?? '',
      park?.ttlMs ?? 0,
      request.localInbox ?? '',
      ...rest,
    ],
    policy,
  );
  return parseCompleteReply(reply, request.extras === CLAIM_EXTRAS);
}

/**
 * Reads complete's flat reply (see lua/complete.lua): parked, the runs' statuses and the steps'
 * (each after its count), then the claims; without claims, those numbers as one string.
 */
export function parseCompleteReply(flat: unknown[] | string, extras = false): CompleteResult {
  const reply = typeof flat === 'string' ? flat.split(' ').map(Number) : flat;
  const completedEnd = 2 + Number(reply[1]);
  const savedEnd = completedEnd + 1 + Number(reply[completedEnd]);
  return {
    completed: statuses(reply, 2, completedEnd),
    saved: statuses(reply, completedEnd + 1, savedEnd),
    parked: reply[0] === 1,
    claims: parseClaims(reply, savedEnd, extras),
  };
}

/** reply[from, to) as booleans: 1 done, 0 its lease was lost. */
function statuses(reply: unknown[], from: number, to: number): boolean[] {
  const done: boolean[] = [];
  for (let i = from; i < to; i++) done.push(reply[i] === 1);
  return done;
}
