import { Logger } from '@nestjs/common';
import { RedisConnectionError, SluiceError } from '../errors';
import { jitteredPause } from '../util/retry';
import { OutageLog } from '../util/outage-log';
import type { ResolvedQueueOptions } from '../queue.options';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisConnections } from '../redis/redis.connections';
import type { RedisKeys } from '../redis/redis.keys';
import { ActiveRun, ActiveRuns } from './active-runs';
import { LazyAbort } from '../execution/lazy.abort';
import { Claim, CLAIM_EXTRAS, parseClaimReply, parseHandoff } from './claim';
import { telemetryApi } from '../telemetry/otel.loader';
import { newCallId, Refill, RunCommits } from './run.commits';
import type { RunExecutor } from './run.executor';
import type { RunEvents } from './run.events';
import { CommitPark, PARK_SLACK_MS, ParkAnnouncer } from './park.announcer';
import { parseStalled, reportStalled } from './stall.report';
import { handBackRun } from './hand-back';

/** Most runs one reserve call claims: Lua runs single-threaded, so one wake must never stall Redis. */
export const RESERVE_BATCH_CAP = 64;
/** Most delayed runs one reserve call promotes. */
const PROMOTE_CAP = 256;
/** Longest a worker blocks on Redis without re-reserving (so it notices clock-driven work). */
export const MAX_BLOCK_MS = 5_000;
/** Pause after a failed wake, doubling per failure in a row up to the maximum (with jitter). */
const ERROR_PAUSE_MS = 500;
const MAX_ERROR_PAUSE_MS = 5_000;
/**
 * How much longer than its block time the blocking read may take before the connection is taken
 * for dead (a silent network loss sends no reset: without this guard an idle worker would wait
 * for the OS keepalive, hours) and replaced.
 */
export const BLOCK_GRACE_MS = 3_000;
/** Longest `stop()` waits for a wake in progress before it lets the loop finish on its own. */
const STOP_GRACE_MS = 1_000;
const REDIS_TIMEOUT_RESOLUTION_MS = 100;
/**
 * When a run taken from a fast-path handoff has its lease renewed, if it is still running: soon
 * enough that the enqueue-time lease cannot run out first, late enough that a short run, done
 * by then, costs no extra call (its commit would otherwise queue behind the renewal).
 */
const HANDOFF_REFRESH_MS = 50;

/** What a worker loop is built from (see WorkerOrchestrator). */
export interface WorkerParts {
  connections: RedisConnections;
  scripts: LuaScripts;
  keys: RedisKeys;
  options: ResolvedQueueOptions;
  /** The workflows this process runs. */
  workflows: string[];
  active: ActiveRuns;
  makeExecutor: (commits: RunCommits) => RunExecutor;
  /** Renews a run's lease now (a handoff's lease started running at its enqueue). */
  refreshLease: (run: ActiveRun) => void;
  /** Answers the schedule plan requests of a reserve reply, in the background (see SchedulePlanner). */
  answerPlanRequests: (redisNowMs: number, requests: unknown[]) => void;
  /** Where the runs this process's stalled scans recovered are reported ('stalled'). */
  events: RunEvents;
  /** Carries on, in the background, a cancel cascade a stalled scan found cut short (see CascadeResumer). */
  resumeCascade: (runId: string) => void;
}

/** Reserve's reply head: see lua/reserve.lua. */
type ReserveHead = [nextDueMs: number, redisNowMs: number, stalled: unknown[] | undefined, cascade: string | undefined, ...planRequests: unknown[]];

/**
 * The reserve loop of one process. Each wake is one reserve call claiming up to the free slots.
 * A saturated worker parks on an in-process signal (its own completions) and pays no round trip;
 * a worker with free slots blocks on its workflows' Redis wake lists until work arrives or the
 * next delayed run is due.
 */
export class WorkerLoop {
  private readonly logger = new Logger('Sluice');
  /** Failed wakes: during an outage every one fails, so one line, then summaries (see OutageLog). */
  private readonly failures = new OutageLog(this.logger);
  /** Runs whose attempt ended without a committed outcome: during an outage, all of them. */
  private readonly runFailures = new OutageLog(this.logger, 'error');
  private stopping = false;
  private failuresInRow = 0;
  /** When the loop last finished a wake (health: a wedged loop stops moving it). */
  lastWakeAt = Date.now();
  /** When a wake last succeeded, and why the latest failed (health: a loop that comes round but fails every time). */
  lastOkAt = Date.now();
  lastError?: string;
  /**
   * The call id of the reserve call to make: kept after a failed call, so the retry of a call
   * that landed gets back the runs it claimed (see replayClaims in lua/includes/claim.lua).
   */
  private reserveCallId = newCallId();
  /** Whether the last reserve call failed: the next one (same call id) looks for its claims. */
  private reserveFailed = false;
  private finished?: Promise<void>;
  private readonly executor: RunExecutor;
  /** Wake list key → workflow name. */
  private readonly wakeKeys: Map<string, string>;
  /** How this worker announces itself as parked (see ParkAnnouncer). */
  private readonly park: ParkAnnouncer;
  private lastStallScan = 0;
  private lastReserveAt = 0;
  /** Slots promised to complete calls in flight that refill them (see {@link refill}). */
  private refilling = 0;
  private rotation = 0;

  private readonly connections: RedisConnections;
  private readonly scripts: LuaScripts;
  private readonly keys: RedisKeys;
  private readonly options: ResolvedQueueOptions;
  private readonly workflows: string[];
  private readonly active: ActiveRuns;
  private readonly refreshLease: (run: ActiveRun) => void;
  private readonly answerPlanRequests: (redisNowMs: number, requests: unknown[]) => void;
  private readonly events: RunEvents;
  private readonly resumeCascade: (runId: string) => void;
  /** Added to reserve's retry flag: {@link CLAIM_EXTRAS} with telemetry on, else 0 (plain claims). */
  private readonly claimFlags: number;
  /** When the next delayed run or schedule fire is due (local clock), from the latest reserve: a saturated worker reserves by then. */
  private nextDueAt = Infinity;

  constructor(parts: WorkerParts) {
    ({ connections: this.connections, scripts: this.scripts, keys: this.keys, options: this.options } = parts);
    ({ workflows: this.workflows, active: this.active, refreshLease: this.refreshLease, answerPlanRequests: this.answerPlanRequests } = parts);
    ({ events: this.events, resumeCascade: this.resumeCascade } = parts);
    this.claimFlags = telemetryApi(parts.options) ? CLAIM_EXTRAS : 0;
    const refill = { take: (runs: number) => this.takeRefill(runs), settle: (claims: Claim[], promised: number, parked?: CommitPark) => this.settleRefill(claims, promised, parked) };
    this.executor = parts.makeExecutor(new RunCommits(parts.scripts, parts.keys, parts.options, refill));
    this.wakeKeys = new Map(parts.workflows.map((wf) => [parts.keys.wake(wf), wf]));
    this.park = new ParkAnnouncer(parts.scripts, parts.keys, parts.workflows, parts.options.worker.lockMs, Math.min(parts.options.worker.stalledIntervalMs, MAX_BLOCK_MS));
  }

  start(): void {
    this.finished = this.loop();
  }

  /**
   * Stops reserving within about two seconds whatever Redis does; in-flight runs carry on (the
   * caller drains them). Runs a wake still claims after this are handed back.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.active.interrupt();
    // Withdraw the park announcement first (an entry that expires at once), so no enqueue hands
    // this worker a run it will not take.
    await this.park.announce(-1, STOP_GRACE_MS).catch(() => undefined);
    // A blocked read must end without popping anything: only closing its connection does that.
    this.connections.blocking.abortAll(new SluiceError('worker stopping'));
    this.connections.blocking.replace('worker stopping', true);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.finished, new Promise((resolve) => (timer = setTimeout(resolve, STOP_GRACE_MS)))]);
    clearTimeout(timer);
  }

  /** Never ends before stop(): every failure is logged (throttled) and followed by a pause. */
  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        // A tick that made no reserve call (see tick) says nothing about Redis: it must not end
        // an outage's log lines or clear the health's loop error.
        if (await this.tick()) {
          this.lastOkAt = Date.now();
          this.lastError = undefined;
          this.failuresInRow = 0;
          this.failures.recovered('Worker loop recovered');
          this.runFailures.recovered();
        }
      } catch (error) {
        if (this.stopping) break;
        this.lastError = (error as Error).message;
        const pause = jitteredPause(this.failuresInRow++, ERROR_PAUSE_MS, MAX_ERROR_PAUSE_MS);
        this.failures.warn(`Worker loop: ${(error as Error).message}; retrying with backoff (up to ${MAX_ERROR_PAUSE_MS} ms apart)`);
        await this.active.whenOneFinishes(pause);
      }
      this.lastWakeAt = Date.now();
    }
  }

  /** One wake of the loop; resolves true if it made a reserve call (which then succeeded). */
  private async tick(): Promise<boolean> {
    const free = this.freeSlots();
    if (free <= 0) {
      // Saturated: our own completion is the event that matters; wake at least once per stall
      // interval to take part in promotion and the stalled scan, and when a schedule is due to
      // fire (firing needs no slot), or MAX_BLOCK_MS passed (a schedule added since).
      const dueIn = Math.max(0, this.nextDueAt - Date.now());
      await this.active.whenOneFinishes(Math.min(this.options.worker.stalledIntervalMs, MAX_BLOCK_MS, dueIn));
      // Still saturated: the finished run's complete call refilled its slot, and claimed what a
      // reserve would. A reserve that claims nothing is only worth it for what else it does.
      if (this.stopping || this.freeSlots() > 0 || !this.saturatedReserveDue()) return false;
      await this.reserve(0, this.workflows);
      return true;
    }
    if (this.park.takeCommitPark()) {
      // The complete call that freed the slot found nothing to claim and parked this worker, so
      // a reserve now would most likely find nothing too: block at once, unless a delayed run or
      // a schedule is due or the stalled scan is (only a reserve does those). Work queued since
      // (not handed over) left a wake marker, which ends the block and brings the reserve.
      const untilDue = this.nextDueAt - Date.now();
      if (untilDue > 0 && !this.stallScanDue()) {
        await this.idle(untilDue === Infinity ? -1 : untilDue);
        return false;
      }
    }
    const wanted = Math.min(free, RESERVE_BATCH_CAP);
    const { claims, head: nextDueMs } = await this.reserve(wanted, this.rotatedWorkflows());
    for (const claim of claims) this.launch(claim);
    // A short batch means nothing more is claimable now: wait for Redis to say otherwise.
    if (claims.length < wanted && nextDueMs !== 0) await this.idle(nextDueMs);
    return true;
  }

  /** Slots of the local semaphore neither running a run nor promised to a refill in flight. */
  private freeSlots(): number {
    return this.options.worker.concurrency - this.active.size - this.refilling;
  }

  /** Only calls that claim take a turn of the rotation, so refills and reserves alternate fairly. */
  private async reserve(wanted: number, workflows: string[]): Promise<{ head: number; claims: Claim[] }> {
    const scan = this.stallScanDue();
    if (scan) this.lastStallScan = Date.now();
    this.park.cleared(); // it drops this worker's park entry: the next block announces again
    this.lastReserveAt = Date.now();
    const keys = [this.keys.leases, this.keys.limits, this.keys.seq, this.keys.stallGate, this.keys.call(this.reserveCallId)];
    const head = [
      this.keys.base, wanted, this.options.worker.lockMs, scan ? this.options.worker.stalledIntervalMs : 0,
      this.options.worker.maxStalls, PROMOTE_CAP, this.options.defaults.resultTtlMs, this.park.entry,
    ];
    const repeat = this.reserveFailed;
    this.reserveFailed = true; // until the reply arrives: the next reserve may repeat this one
    const reply = await this.scripts.run<unknown[]>('reserve', keys, (retry) => [...head, (retry || repeat ? 1 : 0) + this.claimFlags, ...workflows], { idempotent: true });
    this.reserveFailed = false;
    this.reserveCallId = newCallId();
    const parsed = parseClaimReply<ReserveHead>(reply);
    const [nextDueMs, redisNowMs, stalled, cascade, ...planRequests] = parsed.head;
    this.nextDueAt = nextDueMs < 0 ? Infinity : Date.now() + nextDueMs;
    if (planRequests.length > 0) this.answerPlanRequests(redisNowMs, planRequests);
    if (stalled?.length) reportStalled(parseStalled(stalled), this.events, this.logger);
    if (cascade) this.resumeCascade(String(cascade));
    if (this.stopping) {
      this.handBack(parsed.claims);
      return { head: nextDueMs, claims: [] };
    }
    return { head: nextDueMs, claims: parsed.claims };
  }

  /** A saturated worker reserves (claiming nothing) for the stalled scan, a due delayed run or schedule, or at least every MAX_BLOCK_MS (a schedule added since). */
  private saturatedReserveDue(): boolean {
    const now = Date.now();
    return this.stallScanDue() || now >= this.nextDueAt || now - this.lastReserveAt >= MAX_BLOCK_MS;
  }

  private stallScanDue(): boolean {
    return Date.now() - this.lastStallScan >= this.options.worker.stalledIntervalMs;
  }

  /** Claims that arrive after stop(): returned to the queue at once, without counting a failure. */
  private handBack(claims: Claim[]): void {
    for (const claim of claims) handBackRun(this.scripts, this.keys, claim, { idempotent: true }).catch(() => undefined);
  }

  /**
   * Finishing runs refill their own slots in their complete call, saving a reserve round trip.
   * The promised slots count as taken until {@link settleRefill} hands over what was claimed.
   */
  private takeRefill(runs: number): Refill {
    const count = this.stopping ? 0 : runs;
    this.refilling += count;
    // Not parked (an enqueue took the announcement, or none was made): a short refill announces it.
    return { count, workflows: this.rotatedWorkflows(), park: count > 0 ? this.park.forCommit() : undefined };
  }

  private settleRefill(claims: Claim[], promised: number, parked?: CommitPark): void {
    if (parked) this.park.announcedByCommit(parked);
    claims.forEach((claim) => this.launch(claim));
    this.refilling -= promised;
  }

  /** Each call starts the round-robin at the next workflow, so none is always served first. */
  private rotatedWorkflows(): string[] {
    const start = this.rotation++ % this.workflows.length;
    return start === 0 ? this.workflows : [...this.workflows.slice(start), ...this.workflows.slice(0, start)];
  }

  private launch(claim: Claim): ActiveRun {
    const abort = new LazyAbort();
    const run = { id: claim.id, token: claim.token, abort };
    this.active.add(run);
    this.executor
      .execute(claim, abort)
      .catch((error: Error) => this.runFailures.warn(`Run ${claim.id} (${claim.workflow}): ${error.message}; its lease will expire and another attempt will follow`))
      .finally(() => this.active.delete(claim.id, claim.token));
    return run;
  }

  /**
   * Waits on Redis until work arrives. A fast-path handoff is a claimed run, started at once;
   * the worker then blocks again without a reserve: runs queued since come with a marker behind
   * the handoff (see wake in lua/includes/wakes.lua). A marker or a timeout ends the wait.
   */
  private async idle(nextDueMs: number): Promise<void> {
    const deadline = nextDueMs > 0 ? Date.now() + nextDueMs : Infinity;
    while (!this.stopping && this.freeSlots() > 0) {
      const handoff = await this.blockForWake(deadline - Date.now());
      if (!handoff) return;
      if (this.stopping) return this.handBack([handoff]);
      // Its lease has run since the enqueue, with the length the parked worker announced (maybe
      // not this worker's): renew it soon — unless the run is over by then, as most are.
      const run = this.launch(handoff);
      setTimeout(() => this.active.get(run.id) === run && this.refreshLease(run), HANDOFF_REFRESH_MS).unref();
    }
  }

  private async blockForWake(untilDueMs: number): Promise<Claim | undefined> {
    if (untilDueMs <= 0) return undefined;
    // Redis checks blocking timeouts about every 100 ms (hz 10): a delayed run due sooner than
    // that is better served by a local timer, at the cost of noticing new work that much later.
    if (untilDueMs < REDIS_TIMEOUT_RESOLUTION_MS) return void (await this.active.whenOneFinishes(untilDueMs));
    const timeoutMs = Math.min(untilDueMs, this.options.worker.stalledIntervalMs, MAX_BLOCK_MS);
    // Announce the park alongside the block (order does not matter: a handoff pushed before the
    // BLPOP starts is popped at once), so the enqueue fast path knows to hand runs over; unless
    // an announcement still holds for the whole block (a complete call made it).
    if (!this.park.holdsFor(timeoutMs)) {
      this.park.announce(timeoutMs + PARK_SLACK_MS).catch((error: Error) => this.failures.warn(`Park announcement failed: ${error.message}`));
    }
    let popped: [string, string] | null;
    try {
      const bound = timeoutMs + BLOCK_GRACE_MS;
      popped = await this.connections.blocking.call('wait for work', (redis) => redis.blpop(...this.wakeKeys.keys(), Math.max(timeoutMs, 1) / 1000), {
        replyTimeoutMs: bound,
        timeoutMs: this.options.redisTimeoutMs + bound,
      });
    } catch (error) {
      // A lost wake costs nothing: the next reserve looks for work anyway.
      if (this.stopping || error instanceof RedisConnectionError) return undefined;
      throw error;
    }
    this.lastWakeAt = Date.now();
    if (!popped) return undefined;
    // A handoff means the enqueue withdrew this worker's announcement (a marker leaves it be, but
    // the reserve that follows may fill the slots: announce again at the next block). Either way a
    // complete call's park no longer spares the reserve: a marker must bring one (skipping it would
    // leave the run waiting for the next block's timeout, the marker that would end it just taken).
    this.park.cleared();
    return parseHandoff(this.wakeKeys.get(popped[0])!, popped[1]);
  }
}
