import { RedisConnectionError, SluiceError } from '../errors';
import { type Claim, parseHandoff } from '../redis/commands/claim.reply';
import type { RedisKeys } from '../redis/redis.keys';
import type { RedisLink } from '../redis/redis.link';
import type { ActiveRuns } from './active-runs';
import { PARK_SLACK_MS, type ParkAnnouncer } from './park.announcer';

/** Longest a worker blocks on Redis without re-reserving (so it notices clock-driven work). */
export const MAX_BLOCK_MS = 5_000;
/**
 * How much longer than its block time the blocking read may take before the connection is taken
 * for dead (a silent network loss sends no reset: without this guard an idle worker would wait
 * for the OS keepalive, hours) and replaced.
 */
export const BLOCK_GRACE_MS = 3_000;
const REDIS_TIMEOUT_RESOLUTION_MS = 100;

/** What a wake listener is built from (see WorkerLoop). */
export interface WakeListenerParts {
  /** The blocking connection: nothing else is sent over it. */
  blocking: RedisLink;
  keys: RedisKeys;
  workflows: string[];
  park: ParkAnnouncer;
  active: ActiveRuns;
  options: { redisTimeoutMs: number; worker: { stalledIntervalMs: number } };
  stopping(): boolean;
  /** A blocking read ended with an answer from Redis (health: the loop is alive). */
  woke(): void;
  /** A handoff the read popped (one an older producer pushed onto a wake list): launch it. */
  handoff(claim: Claim): void;
  /** Whether the worker has a free slot (a marker popped without one is passed on). */
  hasRoom(): boolean;
  /** Puts a popped marker back for another worker (this one is busy). */
  passOn(wakeKey: string): void;
  /** Where a failed park announcement is reported (throttled by the loop). */
  warn(message: string): void;
}

/** How a blocking read ended: a handoff (launched already), a marker, or nothing (a timeout, a lost wake). */
export type Woken = 'handoff' | 'marker' | undefined;

/**
 * A worker's blocking read on its workflows' wake lists (BLPOP), which ends when a marker (runs
 * are due) or a handoff from an older producer arrives, or the block times out. Handoffs from this
 * release come on the worker's handoff channel instead (lua/includes/enqueue.lua deliverHandoff),
 * so the read stays under way across them: a worker fed by handoffs sends one read per block
 * time, not one per run.
 */
export class WakeListener {
  /** Wake list key → workflow name. */
  private readonly wakeKeys: Map<string, string>;
  /** When the blocking read under way times out (local clock); undefined when none is. */
  private blockEndsAt?: number;
  /** The blocking read under way, or ended and not yet taken by {@link next}. */
  private read?: Promise<Woken | { error: Error }>;

  constructor(private readonly parts: WakeListenerParts) {
    this.wakeKeys = new Map(parts.workflows.map((wf) => [parts.keys.wake(wf), wf]));
  }

  /**
   * Waits for at most `untilDueMs` (and MAX_BLOCK_MS, and the stall interval) on the blocking
   * read, starting one if none is under way. Resolves how it ended, or undefined when
   * `untilDueMs` ran out first (the read then stays under way for the next call).
   */
  async next(untilDueMs: number): Promise<Woken> {
    if (untilDueMs <= 0) return undefined;
    let read = this.read;
    if (!read) {
      // Redis checks blocking timeouts about every 100 ms (hz 10): a delayed run due sooner than
      // that is better served by a local timer, at the cost of noticing new work that much later.
      if (untilDueMs < REDIS_TIMEOUT_RESOLUTION_MS) return void (await this.parts.active.whenOneFinishes(untilDueMs));
      read = this.read = this.blockingRead(Math.min(untilDueMs, this.parts.options.worker.stalledIntervalMs, MAX_BLOCK_MS));
    } else {
      this.announceIfBlocked();
      // Due before the read under way ends: wait that long for it, no longer.
      if (this.blockEndsAt !== undefined && untilDueMs < this.blockEndsAt - Date.now()) {
        let timer: NodeJS.Timeout | undefined;
        const due = await Promise.race([
          read.then(() => false),
          new Promise<boolean>((resolve) => (timer = setTimeout(resolve, untilDueMs, true))),
        ]);
        clearTimeout(timer);
        if (due) return undefined;
      }
    }
    const ended = await read;
    if (this.read === read) this.read = undefined;
    if (typeof ended === 'object') throw ended.error;
    return ended;
  }

  /** One BLPOP of `timeoutMs`, the park announced alongside; never rejects (a failure is its result). */
  private async blockingRead(timeoutMs: number): Promise<Woken | { error: Error }> {
    const { park, options } = this.parts;
    // Announce the park alongside the block (order does not matter: a handoff published before
    // the BLPOP starts is taken all the same), so the enqueue fast path knows to hand runs over;
    // unless an announcement still holds for the whole block (a complete call made it), or one is
    // left to the complete call of the run just handed over (see ParkAnnouncer.defer).
    if (!park.holdsFor(timeoutMs) && !park.deferring) this.announce(timeoutMs + PARK_SLACK_MS);
    let popped: [string, string] | null;
    this.blockEndsAt = Date.now() + timeoutMs;
    try {
      const bound = timeoutMs + BLOCK_GRACE_MS;
      popped = await this.parts.blocking.call(
        'wait for work',
        (redis) => redis.blpop(...this.wakeKeys.keys(), Math.max(timeoutMs, 1) / 1000),
        {
          replyTimeoutMs: bound,
          timeoutMs: options.redisTimeoutMs + bound,
        },
      );
    } catch (error) {
      if (this.parts.stopping() || error instanceof RedisConnectionError) return undefined;
      return { error: error as Error };
    } finally {
      this.blockEndsAt = undefined;
    }
    this.parts.woke();
    if (!popped) return undefined;
    // A handoff means the enqueue withdrew this worker's announcement (a marker leaves it be, but
    // the reserve that follows may fill the slots: announce again at the next block). Either way a
    // complete call's park no longer spares the reserve: a marker must bring one (skipping it would leave
    // the run waiting for the next block's timeout, the marker that would end it just taken).
    park.cleared();
    const [wakeKey, entry] = popped;
    const handoff = parseHandoff(this.wakeKeys.get(wakeKey)!, entry);
    if (handoff) {
      this.parts.handoff(handoff);
      return 'handoff';
    }
    // A busy worker's read (it stays under way across handoffs) must not keep the news from an idle one.
    if (!this.parts.hasRoom()) this.parts.passOn(wakeKey);
    return 'marker';
  }

  /**
   * Announces the park for the rest of the blocking read under way, if there is one and no
   * announcement holds for it: a deferred announcement that no complete call made (see
   * ParkAnnouncer.defer).
   */
  announceIfBlocked(): void {
    if (this.blockEndsAt === undefined || this.parts.stopping()) return;
    const left = this.blockEndsAt - Date.now();
    if (left > 0 && !this.parts.park.holdsFor(left) && !this.parts.park.deferring) this.announce(left + PARK_SLACK_MS);
  }

  private announce(validForMs: number): void {
    this.parts.park.announce(validForMs).catch((error: Error) => this.parts.warn(`Park announcement failed: ${error.message}`));
  }

  /** Ends a blocked read without popping anything: only closing its connection does that. */
  interrupt(): void {
    this.parts.blocking.abortAll(new SluiceError('worker stopping'));
    this.parts.blocking.replace('worker stopping', true);
  }
}
