import { SluiceError } from '../../errors/sluice.error';
import type { ScriptRunner } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';
import { type Claim, CLAIM_EXTRAS, parseClaims } from './claim.reply';

/** One reserve call of a worker wake (lua/reserve.lua). */
export interface ReserveRequest {
  /** The call's id: kept after a failed call, so its retry gets back the runs it claimed (see replayClaims in lua/includes/claim.lua). */
  callId: string;
  /** Most runs to claim (0: only promote, fire schedules and scan). */
  claim: number;
  /** Lease length of the runs claimed. */
  lockMs: number;
  /** The stalled-scan interval, or 0 to skip the scan this call. */
  stallScanMs: number;
  /** Stalls a run may have before it fails for good. */
  maxStalls: number;
  /** Most delayed runs promoted per workflow. */
  promoteCap: number;
  /** Retention of a run the stall limit fails. */
  stalledRetentionMs: number;
  /** The caller's park entry: it is awake, so its park announcements are void (lua/park.lua). */
  parkEntry: string;
  /** If the call claims fewer runs than asked, announce the caller parked for this long, in ms (0: not). */
  parkMs: number;
  /** An earlier call with this id may have landed: look for its claims first. */
  repeat: boolean;
  /** Added to the retry flag: CLAIM_EXTRAS for the telemetry extras on each claim, else 0. */
  extras: number;
  /** The workflows to claim from, rotated by the caller so none always goes first. */
  workflows: string[];
  /** A worker's first reserve when its code declares nothing: claim only if its declarations would write nothing (see {@link DeclarationCheck}). */
  declarationCheck?: DeclarationCheck;
}

/**
 * What the first reserve of a worker whose code declares nothing (no cap, rate limit, schedule
 * or retention setting) checks before it claims: that its declarations would find nothing to
 * write, so the boot need not send them (lua/reserve.lua alreadyDeclared).
 */
export interface DeclarationCheck {
  /** The fingerprint of a declaration of no schedules (see declarationFingerprint). */
  fingerprint: string;
  /** The limits-hash fields the declarations of no cap and no rate limit would clear: none may hold a value or a runtime override. */
  fields: string[];
}

/**
 * A boot reserve's check found something for the declarations to write (a namespace's first boot,
 * a cap an older declaration left, an operator's runtime value…): it did nothing. Internal: the
 * boot sends its declarations, then reserves again (see WorkerOrchestrator).
 */
export class DeclarationsNeededError extends SluiceError {
  constructor() {
    super("the worker's first reserve found its declarations to write first; it claimed nothing");
  }
}

/** The reserve flag that asks for the boot check (ARGV[9] of lua/reserve.lua). */
const DECLARATION_CHECK = 4;

/** A run the call's stalled scan recovered (the worker reports it as a 'stalled' event). */
export interface StalledRun {
  runId: string;
  workflow: string;
  stalls: number;
  /** false: it stalled more than maxStalls times and failed for good. */
  requeued: boolean;
}

/** A request to plan a schedule's next occurrences: see askPlan in lua/includes/schedules.lua. */
export interface PlanRequest {
  id: string;
  workflow: string;
  cron: string;
  tz: string;
  rev: string;
  mode: 'extend' | 'replan';
  /** The plan's tail ('extend') or the next fire ('replan'). */
  seen: string;
  floor: string;
  max: number;
}

/** What one reserve call did. */
export interface ReserveResult {
  /** Ms until the worker's next delayed run, schedule fire or freeing rate window; -1: none; 0: reserve again now (a replay). */
  nextDueMs: number;
  /** Redis time of the call: schedule plans are computed from it, never from the local clock. */
  redisNowMs: number;
  stalled: StalledRun[];
  /** A run whose cancel cascade stood still for a whole scan interval (its caller went away). */
  cascade?: string;
  /** Whether the call announced the caller parked (see ReserveRequest.parkMs). */
  parked: boolean;
  planRequests: PlanRequest[];
  claims: Claim[];
}

type ReserveHead = [
  nextDueMs: number,
  redisNowMs: number,
  stalled: unknown[] | undefined,
  cascade: string | undefined,
  parked: number | undefined,
  ...planRequests: unknown[][],
];

/**
 * Sends one reserve call. Repeating it is harmless (a retry finds its claims by call id), so a
 * lost reply is sent again while the link's bound allows.
 */
export async function reserve(scripts: ScriptRunner, keys: RedisKeys, request: ReserveRequest): Promise<ReserveResult> {
  const callKeys = [keys.stallGate, keys.call(request.callId)];
  const head = [
    keys.base,
    request.claim,
    request.lockMs,
    request.stallScanMs,
    request.maxStalls,
    request.promoteCap,
    request.stalledRetentionMs,
    request.parkEntry,
  ];
  const { declarationCheck: check } = request;
  const flags = request.extras + (check ? DECLARATION_CHECK : 0);
  const tail = check ? [check.fingerprint, check.fields.length, ...check.fields, ...request.workflows] : request.workflows;
  const reply = await scripts.run<unknown[] | 'declare'>(
    'reserve',
    callKeys,
    (retry) => [...head, (retry || request.repeat ? 1 : 0) + flags, request.parkMs, ...tail],
    // The check stands in for a boot's declarations, which give up at once when Redis refuses
    // connections: the app boots, and the worker starts once Redis answers.
    { idempotent: true, failFast: check !== undefined },
  );
  if (reply === 'declare') throw new DeclarationsNeededError();
  return parseReserveReply(reply, request.extras === CLAIM_EXTRAS);
}

/** Reads reserve's reply (see lua/reserve.lua): its head, then the claims, flat. */
export function parseReserveReply(reply: unknown[], extras = false): ReserveResult {
  const [nextDueMs, redisNowMs, stalled, cascade, parked, ...plans] = reply[0] as ReserveHead;
  return {
    nextDueMs,
    redisNowMs,
    stalled: stalled?.length ? parseStalled(stalled) : [],
    cascade: cascade ? String(cascade) : undefined,
    parked: parked === 1,
    planRequests: plans.map(toPlanRequest),
    claims: parseClaims(reply, 1, extras),
  };
}

/** The stalled list of the reply head: flat `id, workflow, stalls, requeued (1|0)` quadruples. */
function parseStalled(flat: unknown[]): StalledRun[] {
  const stalled: StalledRun[] = [];
  for (let i = 0; i + 3 < flat.length; i += 4) {
    stalled.push({
      runId: String(flat[i]),
      workflow: String(flat[i + 1]),
      stalls: Number(flat[i + 2]),
      requeued: Number(flat[i + 3]) === 1,
    });
  }
  return stalled;
}

function toPlanRequest(row: unknown[]): PlanRequest {
  const [id, workflow, cron, tz, rev, mode, seen, floor, max] = row as [
    string,
    string,
    string,
    string,
    string,
    PlanRequest['mode'],
    string,
    string,
    number,
  ];
  return { id, workflow, cron, tz, rev, mode, seen, floor, max };
}
