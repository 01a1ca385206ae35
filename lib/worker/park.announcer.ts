import { park, withdrawPark } from '../redis/commands/park.command';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import type { RedisLink } from '../redis/redis.link';

/** How long a park announcement outlives the block it announces. */
export const PARK_SLACK_MS = 1_000;

/** The park announcement a complete or reserve call is to make if its claims come up short (see lua/complete.lua, lua/reserve.lua). */
export interface ShortClaimPark {
  entry: string;
  ttlMs: number;
  /** The announcer's epoch when the call was sent: a later change of the entry voids it (see announcedByCommit). */
  epoch: number;
}

/**
 * A worker's park announcements (lua/park.lua), which tell the enqueue fast path that a run can
 * be handed straight to this worker. Announced by a park call before the worker blocks, or by
 * the complete or reserve call whose claims came up short (see lua/complete.lua, lua/reserve.lua),
 * the complete call being left to do it after a handoff (see {@link ParkAnnouncer.defer});
 * withdrawn by an enqueue that hands a run over, and at the start of every reserve call of the
 * worker, which announces it again only if it comes up short. Remembers
 * until when the latest one holds, so a live one is not announced again, and whether it was a
 * complete call's (which spares the worker's next wake its reserve).
 */
export class ParkAnnouncer {
  /**
   * The worker's entry in the parked sets: its id, then 'h' (its handoffs are published on its
   * handoff channel, see WorkerChannels), then its lease length (a handoff gets that lease).
   */
  readonly entry: string;
  /** Until when (local clock) the latest announcement holds; 0 once an enqueue or a reserve withdrew it. */
  private parkedUntil = 0;
  /**
   * Counts the changes this worker knows its entry went through (announced, withdrawn), so a
   * complete call's announcement whose reply arrives after a later change is not taken as current.
   */
  private epoch = 0;
  /** The latest change was a complete call's announcement, not yet taken (see {@link takeCommitPark}). */
  private byCommit = false;
  /** The announcement is left to the complete call of a run just handed over (see {@link defer}). */
  private deferred = false;
  /** Counts deferrals, so that a timer ends only its own (see {@link endDeferral}). */
  private deferrals = 0;

  constructor(
    private readonly scripts: LuaScripts,
    /** The command connection, which the park calls go over too (see {@link withdraw}). */
    private readonly link: RedisLink,
    private readonly keys: RedisKeys,
    private readonly workflows: string[],
    workerId: string,
    lockMs: number,
    /** How long an announcement made by a complete call holds: the worker's longest block. */
    private readonly longestBlockMs: number,
  ) {
    this.entry = `${workerId}:h:${lockMs}`;
  }

  /** Announces the worker parked for `validForMs`. */
  announce(validForMs: number): Promise<void> {
    this.changed(Date.now() + validForMs);
    return park(this.scripts, this.keys, { entry: this.entry, validForMs, workflows: this.workflows });
  }

  /** Withdraws the announcement (the worker stops): no enqueue hands the worker a run after it. */
  withdraw(timeoutMs: number): Promise<void> {
    this.changed(0);
    return withdrawPark(this.link, this.keys, this.entry, this.workflows, timeoutMs);
  }

  /** Whether the latest announcement still holds through a block of `blockMs` from now. */
  holdsFor(blockMs: number): boolean {
    return this.parkedUntil >= Date.now() + blockMs + PARK_SLACK_MS / 2;
  }

  /** What a complete or reserve call needs to announce the park itself if its claims come up short, when none holds now. */
  forShortClaim(): ShortClaimPark | undefined {
    return this.parkedUntil <= Date.now() ? { entry: this.entry, ttlMs: this.commitTtlMs(), epoch: this.epoch } : undefined;
  }

  /**
   * A complete call announced it (its refill came up short). Returns whether that announcement
   * still stands: not if the entry changed since the call was sent — e.g. a reserve sent after it
   * (so run after it, on the same connection) dropped it, or an enqueue took it to hand a run
   * over. Believing such a stale one would have the worker block unannounced, off the fast path.
   */
  announcedByCommit(park: ShortClaimPark): boolean {
    if (park.epoch !== this.epoch) return false;
    this.parkedUntil = Date.now() + park.ttlMs;
    this.byCommit = true;
    this.deferred = false;
    return true;
  }

  /**
   * A reserve call announced it (it claimed fewer runs than asked, so the worker blocks next).
   * Unlike a complete call's, it spares the worker no reserve: it was one. Ignored if the entry
   * changed since the call was sent (an enqueue took it to hand a run over).
   */
  announcedByReserve(park: ShortClaimPark): void {
    if (park.epoch === this.epoch) this.parkedUntil = Date.now() + park.ttlMs;
  }

  /**
   * Leaves the announcement to come to the complete call of the run just handed over (an enqueue
   * took the entry to hand it): the worker blocks again without a park call of its own, and that
   * complete call, which would otherwise find nothing to announce, parks it when its refill comes
   * up short — a round trip less per handed-over run. Until then enqueues take the queue, and
   * the blocked worker the wake marker they leave; so a deferral is short: it ends with an
   * announcement, or with {@link endDeferral} (that call claimed runs or failed, or the run is
   * still going after a few ms), after which the blocked worker announces itself again.
   */
  defer(): number {
    this.deferred = true;
    return ++this.deferrals;
  }

  /** Whether the announcement is left to a complete call now (see {@link defer}). */
  get deferring(): boolean {
    return this.deferred;
  }

  /**
   * Ends the deferral under way — only if it is the one numbered `deferral` (as {@link defer}
   * returned it), when given. Returns whether one ended (the worker is to announce itself if blocked).
   */
  endDeferral(deferral?: number): boolean {
    if (!this.deferred || (deferral !== undefined && deferral !== this.deferrals)) return false;
    this.deferred = false;
    return true;
  }

  /**
   * Whether a complete call announced the park since the entry last changed otherwise (taking it
   * clears it): its refill just found the lanes empty, so the worker may block without reserving
   * first. Any later change ends it — a reserve looks at the lanes itself, and anything popped from
   * the wake lists means work came after that call (a popped marker must bring a reserve).
   */
  takeCommitPark(): boolean {
    const announced = this.byCommit;
    this.byCommit = false;
    return announced;
  }

  /**
   * The announcement is gone from Redis: an enqueue that handed this worker a run took it, or a
   * reserve call dropped it (lua/reserve.lua). The next block announces again.
   */
  cleared(): void {
    this.changed(0);
  }

  private changed(parkedUntil: number): void {
    this.parkedUntil = parkedUntil;
    this.epoch++;
    this.byCommit = false;
    this.deferred = false;
  }

  private commitTtlMs(): number {
    return this.longestBlockMs + PARK_SLACK_MS;
  }
}
