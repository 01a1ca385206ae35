import { Logger } from '@nestjs/common';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { newCallId } from '../redis/commands/call-id';
import type { Claim } from '../redis/commands/claim.reply';
import { type DeclarationCheck, DeclarationsNeededError, type PlanRequest, reserve } from '../redis/commands/reserve.command';
import { LayoutRefusedError } from '../redis/layout.gate';
import type { LuaScripts, ScriptRunner } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import type { ParkAnnouncer } from './park.announcer';
import type { RunEvents } from './run.events';
import { reportStalled } from './stall.report';
import { MAX_BLOCK_MS } from './wake.listener';

/** Most runs one reserve call claims: Lua runs single-threaded, so one wake must never stall Redis. */
export const RESERVE_BATCH_CAP = 64;
/** Most delayed runs one reserve call promotes. */
const PROMOTE_CAP = 256;

/** What a reserve caller is built from (see WorkerLoop). */
export interface ReserveCallerParts {
  scripts: LuaScripts;
  keys: RedisKeys;
  options: ResolvedQueueOptions;
  park: ParkAnnouncer;
  /** Answers the schedule plan requests of a reserve reply, in the background (see SchedulePlanner). */
  answerPlanRequests: (redisNowMs: number, requests: PlanRequest[]) => void;
  /** Where the runs this process's stalled scans recovered are reported ('stalled'). */
  events: RunEvents;
  /** Carries on, in the background, a cancel cascade a stalled scan found cut short (see CascadeResumer). */
  resumeCascade: (runId: string) => void;
  /** Flags for the telemetry extras, asked per call (see WorkerParts). */
  claimExtras: () => number;
}

/**
 * A worker's reserve calls (lua/reserve.lua): each promotes due delayed runs, fires due
 * schedules, runs the stalled scan when due, and claims up to the slots asked for. Remembers
 * what the next call needs: its call id after a failure (so the retry of a call that landed gets
 * back its claims), when the stalled scan and the next due run are.
 */
export class ReserveCaller {
  private readonly logger = new Logger('Sluice');
  /**
   * The call id of the reserve call to make: kept after a failed call, so the retry of a call
   * that landed gets back the runs it claimed (see replayClaims in lua/includes/claim.lua).
   */
  private callId = newCallId();
  /** Whether the last reserve call failed: the next one (same call id) looks for its claims. */
  private failed = false;
  private lastStallScan = 0;
  private lastReserveAt = 0;
  /** When the next delayed run or schedule fire is due (local clock), from the latest reserve: a saturated worker reserves by then. */
  private nextDueAt = Infinity;
  constructor(private readonly parts: ReserveCallerParts) {}

  /**
   * One reserve call claiming up to `wanted` runs of `workflows`. Resolves the ms until the next
   * due run (-1: none; 0: reserve again now) and the claims; hands on what else the reply carries.
   * `scripts`: what sends it, if not the worker's scripts (a boot's at-layout view, see LoopBoot);
   * `declarationCheck`: a boot's check that it has nothing to declare (see DeclarationCheck).
   */
  async reserve(
    wanted: number,
    workflows: string[],
    scripts: ScriptRunner = this.parts.scripts,
    declarationCheck?: DeclarationCheck,
  ): Promise<{ nextDueMs: number; claims: Claim[] }> {
    const { options, park } = this.parts;
    const scan = this.stallScanDue();
    const lastScan = this.lastStallScan;
    if (scan) this.lastStallScan = Date.now();
    park.cleared(); // it drops this worker's park entry: the next block announces again
    // Unless the call comes up short: then it announces the park itself (the block follows at once).
    const announcement = wanted > 0 ? park.forShortClaim() : undefined;
    this.lastReserveAt = Date.now();
    const repeat = this.failed;
    this.failed = true; // until the reply arrives: the next reserve may repeat this one
    const reply = await reserve(scripts, this.parts.keys, {
      callId: this.callId,
      claim: wanted,
      lockMs: options.worker.lockMs,
      stallScanMs: scan ? options.worker.stalledIntervalMs : 0,
      maxStalls: options.worker.maxStalls,
      promoteCap: PROMOTE_CAP,
      stalledRetentionMs: options.defaults.resultTtlMs,
      parkEntry: park.entry,
      parkMs: announcement?.ttlMs ?? 0,
      repeat,
      extras: this.parts.claimExtras(),
      workflows,
      declarationCheck,
    }).catch((error: unknown) => {
      if (error instanceof LayoutRefusedError || error instanceof DeclarationsNeededError) {
        // Refused before doing anything: no claims to look for, and the scan is still due.
        this.failed = repeat;
        this.lastStallScan = lastScan;
      }
      throw error;
    });
    this.failed = false;
    this.callId = newCallId();
    if (reply.parked && announcement) park.announcedByReserve(announcement);
    this.nextDueAt = reply.nextDueMs < 0 ? Infinity : Date.now() + reply.nextDueMs;
    if (reply.planRequests.length > 0) this.parts.answerPlanRequests(reply.redisNowMs, reply.planRequests);
    if (reply.stalled.length > 0) reportStalled(reply.stalled, this.parts.events, this.logger);
    if (reply.cascade) this.parts.resumeCascade(reply.cascade);
    return { nextDueMs: reply.nextDueMs, claims: reply.claims };
  }

  /** Ms until the next delayed run or schedule fire is due (Infinity: none known). */
  untilDueMs(): number {
    return this.nextDueAt - Date.now();
  }

  /** A saturated worker reserves (claiming nothing) for the stalled scan, a due delayed run or schedule, or at least every MAX_BLOCK_MS (a schedule added since). */
  saturatedReserveDue(): boolean {
    const now = Date.now();
    return this.stallScanDue() || now >= this.nextDueAt || now - this.lastReserveAt >= MAX_BLOCK_MS;
  }

  stallScanDue(): boolean {
    return Date.now() - this.lastStallScan >= this.parts.options.worker.stalledIntervalMs;
  }
}
