import { setImmediate as afterThisTurn } from 'node:timers/promises';
import { BootQuiet } from './boot.quiet';
import { Logger } from '@nestjs/common';
import { jitteredPause } from '../util/retry';
import { OutageLog } from '../util/outage-log';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { type Claim, parsePublishedHandoff } from '../redis/commands/claim.reply';
import type { DeclarationCheck } from '../redis/commands/reserve.command';
import type { LuaScripts, ScriptRunner } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import { ActiveRun, ActiveRuns } from './active-runs';
import { Refill, RunCommits } from './run.commits';
import { RunLauncher } from './run.launcher';
import { ClaimSequencer } from './claim.sequencer';
import type { WorkerParts } from './worker.parts';
import { ShortClaimPark, ParkAnnouncer } from './park.announcer';
import { RESERVE_BATCH_CAP, ReserveCaller } from './reserve.caller';
import { MAX_BLOCK_MS, WakeListener } from './wake.listener';
import { handBackRun } from './hand-back';

/*
 * The states of a worker loop, one wake (tick) at a time:
 *
 * - reserving: a reserve call (ReserveCaller) claims up to the free slots (at most
 *   RESERVE_BATCH_CAP) and launches what it claimed. A full batch reserves again at once; a short
 *   one means nothing more is claimable now → blocked.
 * - blocked on Redis: free slots and nothing to claim. A blocking read on the workflows' wake
 *   lists (WakeListener), the worker announced parked so an enqueue hands it runs straight away.
 *   A handoff is launched and the worker blocks again, its announcement left to that run's
 *   complete call (ParkAnnouncer.defer); a marker, a timeout or a due run → reserving.
 *   A complete call whose refill came up short parked the worker already: it comes here first.
 * - saturated: every slot busy (running, held ready, committing, or promised to a claiming call in
 *   flight; see RunLauncher). Parked in-process on its own runs' completions, no round trip: a
 *   finishing run's complete call refills its slot.
 *   Wakes to reserve, claiming nothing, only for the stalled scan or a due delayed run or schedule.
 * - backing off: a wake failed; a jittered pause that doubles per failure in a row, then → reserving.
 * - stopping: stop() was called; no more reserves, and claims still arriving are handed back.
 */

/** Pause after a failed wake, doubling per failure in a row up to the maximum (with jitter). */
const ERROR_PAUSE_MS = 500;
const MAX_ERROR_PAUSE_MS = 5_000;
/** Longest `stop()` waits for a wake in progress before it lets the loop finish on its own. */
const STOP_GRACE_MS = 1_000;
/**
 * When a run taken from a fast-path handoff has its lease renewed, if it is still running: soon
 * enough that the enqueue-time lease cannot run out first, late enough that a short run, done
 * by then, costs no extra call (its commit would otherwise queue behind the renewal).
 */
const HANDOFF_REFRESH_MS = 50;

/**
 * A loop started at a worker's bootstrap, before the namespace's layout was read and its
 * declarations written (see WorkerOrchestrator): its first reserve goes out at once, through
 * `scripts` (LuaScripts.atLayout: it runs only at a layout this version works on as it is), and
 * what it claims waits for `ready`, the declarations written. A refused or failed first reserve
 * waits for `ready` too, then the loop goes on as any other.
 */
export interface LoopBoot {
  scripts: ScriptRunner;
  ready: Promise<void>;
  /**
   * For a worker whose code declares nothing, sent instead of its declarations: the first reserve
   * claims only if they would write nothing, and says so by `settled(true)`; `settled(false)` if
   * it found something to declare, failed, or was never sent (the loop stopped first).
   */
  declarations?: { check: DeclarationCheck; settled(passed: boolean): void };
}

/**
 * The reserve loop of one process (its states: see the top of this file). Each wake is one
 * reserve call claiming up to the free slots. A saturated worker parks on an in-process signal
 * (its own completions) and pays no round trip; a worker with free slots blocks on its
 * workflows' Redis wake lists until work arrives or the next delayed run is due.
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
  private finished?: Promise<void>;
  /** Until the first reserve: the bootstrap it belongs to (see LoopBoot). */
  private boot?: LoopBoot;
  /**
   * The boot's first reserve got no claims from Redis (refused until the bootstrap's declarations
   * are written, or failed): the next reserve, which the loop sends at once, is the one whose runs
   * keep the idle-time connections closed (see BootQuiet).
   */
  private quietAwaitsReserve = false;
  /** Until it is over, the loop does not block on Redis (see BootQuiet); the subscriber waits for it too (WorkerOrchestrator). */
  readonly bootQuiet = new BootQuiet();
  /** Resolves when stop() is called: what waits for the boot waits no longer. */
  private readonly stopped: Promise<void>;
  private markStopped!: () => void;
  /** Starts claims within the concurrency, holding a few ready while runs are short (see RunLauncher). */
  private readonly launcher: RunLauncher;
  private readonly sequencer: ClaimSequencer;
  /** How this worker announces itself as parked (see ParkAnnouncer). */
  private readonly park: ParkAnnouncer;
  private readonly reserver: ReserveCaller;
  private readonly wake: WakeListener;
  private readonly commits: RunCommits;
  private rotation = 0;
  private readonly scripts: LuaScripts;
  private readonly keys: RedisKeys;
  private readonly options: ResolvedQueueOptions;
  private readonly workflows: string[];
  private readonly active: ActiveRuns;
  private readonly refreshLease: (run: ActiveRun) => void;

  constructor(parts: WorkerParts) {
    this.stopped = new Promise((resolve) => (this.markStopped = resolve));
    ({
      scripts: this.scripts,
      keys: this.keys,
      options: this.options,
      workflows: this.workflows,
      active: this.active,
      refreshLease: this.refreshLease,
    } = parts);
    const refill = {
      take: (runs: number) => this.takeRefill(runs),
      settle: (ticket: number, claims: Claim[], park: ShortClaimPark | undefined, parked: boolean) =>
        this.settleRefill(ticket, claims, park, parked),
    };
    this.commits = new RunCommits(parts.scripts, parts.keys, parts.options, refill, {
      holding: () => this.active.size,
      claimExtras: parts.claimExtras,
      localWaits: parts.localWaits,
    });
    const executor = parts.makeExecutor(this.commits);
    this.launcher = new RunLauncher({
      concurrency: parts.options.worker.concurrency,
      active: parts.active,
      execute: (claim, abort, codeDone) => executor.execute(claim, abort, codeDone),
      handBack: (claims) => this.handBack(claims),
      failed: (claim, error) =>
        this.runFailures.warn(
          `Run ${claim.id} (${claim.workflow}): ${error.message}; its lease will expire and another attempt will follow`,
        ),
      stopping: () => this.stopping,
    });
    this.sequencer = new ClaimSequencer((claim) => this.launcher.launch(claim));
    this.park = new ParkAnnouncer(
      parts.scripts,
      parts.connections.command,
      parts.keys,
      parts.workflows,
      parts.workerId,
      parts.options.worker.lockMs,
      Math.min(parts.options.worker.stalledIntervalMs, MAX_BLOCK_MS),
    );
    this.reserver = new ReserveCaller({ ...parts, park: this.park });
    this.wake = new WakeListener({
      blocking: parts.connections.blocking,
      keys: parts.keys,
      workflows: parts.workflows,
      park: this.park,
      active: parts.active,
      options: parts.options,
      stopping: () => this.stopping,
      woke: () => (this.lastWakeAt = Date.now()),
      handoff: (claim) => this.takeHandoff(claim),
      hasRoom: () => this.freeSlots() > 0,
      // One marker more at worst (a list ends in at most one, see lua/includes/wakes.lua): one more wake.
      passOn: (wakeKey) =>
        void parts.connections.command.call('pass a wake on', (redis) => redis.rpush(wakeKey, '1')).catch(() => undefined),
      warn: (message) => this.failures.warn(message),
    });
  }

  /**
   * A message on this worker's handoff channel (lua/includes/enqueue.lua deliverHandoff): a run
   * an enqueue claimed for it, `<workflow> <token> <id> <input>`.
   */
  handoffPublished(message: string): void {
    const claim = parsePublishedHandoff(message);
    if (claim) this.handedOff(claim);
  }

  /**
   * A run an enqueue claimed for this worker: published on its handoff channel, or told by the
   * reply of this process's own enqueue, which Redis publishes nothing for (see LocalWorker). The
   * enqueue took the park announcement; the blocking read under way, if any, stays so.
   */
  handedOff(claim: Claim): void {
    this.park.cleared();
    this.takeHandoff(claim);
  }

  /** `boot`: the bootstrap this loop starts in, whose first reserve it sends at once (see LoopBoot). */
  start(boot?: LoopBoot): void {
    this.boot = boot;
    if (!boot) this.bootQuiet.end();
    this.finished = this.loop();
  }

  /**
   * Stops reserving within about two seconds whatever Redis does; in-flight runs carry on (the
   * caller drains them). Runs a wake still claims after this are handed back.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.markStopped();
    this.bootQuiet.end();
    this.boot?.declarations?.settled(false); // its first reserve never went out
    this.launcher.handBackHeld();
    this.active.interrupt();
    // Withdraw the park announcement first, so no enqueue hands this worker a run it will not take.
    await this.park.withdraw(STOP_GRACE_MS).catch(() => undefined);
    this.wake.interrupt();
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
      // Runs that finish wake it only once a slot is free: most find theirs refilled already, by
      // their complete call, which claimed what a reserve would.
      const dueIn = Math.max(0, this.reserver.untilDueMs());
      await this.active.whenOneFinishes(Math.min(this.options.worker.stalledIntervalMs, MAX_BLOCK_MS, dueIn), this.slotFreed);
      // Still saturated (the timeout): a reserve that claims nothing is only worth it for what else it does.
      if (this.stopping || this.freeSlots() > 0 || !this.reserver.saturatedReserveDue()) return false;
      await this.reserve(0, this.workflows);
      return true;
    }
    // A complete call going out this turn with every run held claims for the free slots too (see
    // takeRefill): no reserve of their own (a worker of 1 that learns its runs are short holds more).
    const completing = this.commits.completing();
    if (completing > 0 && completing >= this.active.size) {
      await afterThisTurn();
      return false;
    }
    if (this.park.takeCommitPark()) {
      // The complete call that freed the slot found nothing to claim and parked this worker, so
      // a reserve now would most likely find nothing too: block at once, unless a delayed run or
      // a schedule is due or the stalled scan is (only a reserve does those). Work queued since
      // (not handed over) left a wake marker, which ends the block and brings the reserve.
      const untilDue = this.reserver.untilDueMs();
      if (untilDue > 0 && !this.reserver.stallScanDue()) {
        await this.idle(untilDue === Infinity ? -1 : untilDue);
        return false;
      }
    }
    const wanted = Math.min(free, RESERVE_BATCH_CAP);
    const { claimed, nextDueMs } = await this.reserve(wanted, this.rotatedWorkflows());
    // A short batch means nothing more is claimable now: wait for Redis to say otherwise.
    if (claimed < wanted && nextDueMs !== 0) await this.idle(nextDueMs);
    return true;
  }

  private readonly slotFreed = () => this.stopping || this.freeSlots() > 0;

  /** Room for claims: the runs the launcher may hold, less those held (running, ready or committing) and those promised to a claiming call in flight. */
  private freeSlots(): number {
    return this.launcher.capacity() - this.active.size - this.sequencer.promised;
  }

  /**
   * Only calls that claim take a turn of the rotation, so refills and reserves alternate fairly.
   * What it claimed is launched in the order the calls were sent (see ClaimSequencer).
   */
  private async reserve(wanted: number, workflows: string[]): Promise<{ nextDueMs: number; claimed: number }> {
    const ticket = this.sequencer.ticket(wanted);
    const boot = this.boot;
    this.boot = undefined;
    const settlesQuiet = boot !== undefined || this.quietAwaitsReserve;
    this.quietAwaitsReserve = false;
    let answered = false;
    let claims: Claim[] = [];
    try {
      const check = boot?.declarations;
      const reserved = await this.reserver.reserve(wanted, workflows, boot?.scripts, check?.check).then(
        (result) => {
          answered = true;
          check?.settled(true);
          return result;
        },
        async (error: unknown) => {
          if (!boot) throw error;
          check?.settled(false);
          // Refused at another layout or for declarations to write first, or failed (Redis
          // away): the bootstrap says when to go on.
          await Promise.race([boot.ready, this.stopped]);
          return { nextDueMs: 0, claims: [] };
        },
      );
      if (boot) await Promise.race([boot.ready, this.stopped]);
      if (this.stopping) this.handBack(reserved.claims);
      else claims = reserved.claims;
      return { nextDueMs: reserved.nextDueMs, claimed: reserved.claims.length };
    } finally {
      this.sequencer.deliver(ticket, claims);
      if (settlesQuiet) {
        if (boot && !answered && !this.stopping) this.quietAwaitsReserve = true;
        else this.bootQuiet.claimed(claims.length, this.active);
      }
    }
  }

  /** Claims that arrive after stop(): returned to the queue at once, without counting a failure. */
  private handBack(claims: Claim[]): void {
    for (const claim of claims) handBackRun(this.scripts, this.keys, claim, { idempotent: true }).catch(() => undefined);
  }

  /**
   * Finishing runs refill their own slots in their complete call, saving a reserve round trip; with
   * every run held in the call, the free slots too, up to what one reserve claims (see tick).
   * The promised slots count as taken until what was claimed is launched (ClaimSequencer).
   */
  private takeRefill(runs: number): Refill {
    const free = runs >= this.active.size ? Math.max(0, Math.min(this.freeSlots(), RESERVE_BATCH_CAP - runs)) : 0;
    const count = this.stopping ? 0 : runs + free;
    const ticket = this.sequencer.ticket(count);
    // Not parked (an enqueue took the announcement, or none was made): a short refill announces it.
    return { ticket, count, workflows: this.rotatedWorkflows(), park: count > 0 ? this.park.forShortClaim() : undefined };
  }

  /** `park`: the announcement the call carried, if any; `parked`: whether it made it. */
  private settleRefill(ticket: number, claims: Claim[], park: ShortClaimPark | undefined, parked: boolean): void {
    if (park && parked) this.park.announcedByCommit(park);
    else if (park) this.endDeferral(); // the refill claimed runs (or the call failed): no announcement came
    this.sequencer.deliver(ticket, claims);
  }

  /** A deferred announcement (see ParkAnnouncer.defer) that no complete call made: the blocked worker makes it. */
  private endDeferral(deferral?: number): void {
    if (this.park.endDeferral(deferral)) this.wake.announceIfBlocked();
  }

  /** Each call starts the round-robin at the next workflow, so none is always served first. */
  private rotatedWorkflows(): string[] {
    const start = this.rotation++ % this.workflows.length;
    return start === 0 ? this.workflows : [...this.workflows.slice(start), ...this.workflows.slice(0, start)];
  }

  /**
   * Waits on Redis until work arrives. A fast-path handoff is a claimed run, started at once;
   * the worker then blocks again without a reserve: runs queued since come with a marker behind
   * the handoff (see wake in lua/includes/wakes.lua). A marker or a timeout ends the wait.
   */
  private async idle(nextDueMs: number): Promise<void> {
    const deadline = nextDueMs > 0 ? Date.now() + nextDueMs : Infinity;
    if (!this.bootQuiet.isOver) await Promise.race([this.bootQuiet.over, this.stopped]);
    while (!this.stopping && this.freeSlots() > 0) {
      if ((await this.wake.next(deadline - Date.now())) !== 'handoff') return;
      // Block again only after this turn's I/O: a short run then sends its complete call first,
      // and the blocking read's write is off the path from the enqueue to the run's result.
      if (!this.stopping && this.freeSlots() > 0) await afterThisTurn();
    }
  }

  /**
   * Starts a run an enqueue handed this worker (published, or popped from a wake list). Its lease
   * has run since the enqueue, with the length the parked worker announced (maybe not this
   * worker's): renew it soon — unless the run is over by then, as most are. The enqueue took the
   * park announcement: leave it to the run's complete call, which makes it with no round trip of
   * its own; if the run is still going by then, announce it now.
   */
  private takeHandoff(claim: Claim): void {
    if (this.stopping) return this.handBack([claim]);
    const run = this.launcher.launch(claim);
    const deferral = this.park.defer();
    setTimeout(() => {
      if (this.active.get(run.id) === run) this.refreshLease(run);
      this.endDeferral(deferral);
    }, HANDOFF_REFRESH_MS).unref();
  }
}
