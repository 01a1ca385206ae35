import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import type { LuaScripts } from '../redis/lua.scripts';
import { encodeProgress } from '../redis/progress.codec';
import type { RedisKeys } from '../redis/redis.keys';
import type { Claim } from '../redis/commands/claim.reply';
import { commitPolicy } from '../redis/commands/commit.policy';
import { storeProgress } from '../redis/commands/progress.command';

/** Least time between the starts of two progress writes of one run attempt. */
export const PROGRESS_INTERVAL_MS = 250;

/** Stores one encoded value under the run's lease: true if stored, false if the lease is gone. Rejects if Redis failed. */
export type WriteProgress = (encoded: string) => Promise<boolean>;

/**
 * `ctx.progress` of one run attempt, made on its first call (a run that never reports progress
 * pays for nothing but the `ctx.progress` closure). Writes are throttled to one per
 * {@link PROGRESS_INTERVAL_MS}, one at a time, and the latest value wins: a value reported while
 * a write is in flight or too recent waits for the next slot, replacing any value already
 * waiting (whose promise then resolves with the later value's). Values reported in the same
 * event-loop turn collapse into one write.
 *
 * {@link end} at the end of the attempt sends a value still waiting at once, without waiting
 * for its slot, and without the outcome waiting for it: it is sent before the outcome's call on
 * the same connection, so it normally lands first, and a write that comes too late is refused
 * by the token (the run is no longer active). So the value stored last is the last one reported.
 *
 * Progress is advisory: a failed write is reported to `onError` and its promise resolves; a lost
 * lease stops the reporter (the new owner of the run reports its own).
 */
export class ProgressReporter {
  /** The value waiting for the next write slot, and the promises it settles. */
  private pending: string | undefined;
  private settles: Array<() => void> = [];
  private writing = false;
  private timer: NodeJS.Timeout | undefined;
  private lastWriteAt = Number.NEGATIVE_INFINITY;
  private stopped = false;

  constructor(
    private readonly write: WriteProgress,
    private readonly maxPayloadBytes: number,
    private readonly onError: (error: unknown) => void,
    private readonly intervalMs = PROGRESS_INTERVAL_MS,
  ) {}

  /** The reporter of a claimed run: token-checked writes through lua/progress.lua, sent with the commit policy. */
  static forClaim(
    scripts: LuaScripts,
    keys: RedisKeys,
    options: ResolvedQueueOptions,
    claim: Claim,
    onError: (error: unknown) => void,
  ): ProgressReporter {
    const policy = commitPolicy(options);
    const write: WriteProgress = (encoded) => storeProgress(scripts, keys, { claim, encoded }, policy);
    return new ProgressReporter(write, options.maxPayloadBytes, onError);
  }

  /** Resolves once this value or a later one is written, or dropped; rejects (before any write) only for a bad value. */
  report(value: unknown): Promise<void> {
    let encoded: string;
    try {
      encoded = encodeProgress(value, this.maxPayloadBytes);
    } catch (error) {
      // Marked handled: a caller that fires and forgets must not get an unhandled rejection
      // (which ends the process); one that awaits still gets the typed error.
      const rejected = Promise.reject(error);
      rejected.catch(() => undefined);
      return rejected;
    }
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      this.pending = encoded;
      this.settles.push(resolve);
      this.schedule();
    });
  }

  /**
   * The attempt is over: sends the value still waiting, if any, now; later calls write nothing.
   * Called before the outcome's call (complete or fail), which must not wait for this write.
   */
  end(): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.flush();
    this.stopped = true;
  }

  /** The lease is gone: drops the waiting value. A write in flight lands or is refused by its token. */
  private stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = undefined;
    this.settles.splice(0).forEach((settle) => settle());
  }

  private schedule(): void {
    // A write in flight, or the timer already set, takes the pending value when its turn comes.
    if (this.stopped || this.pending === undefined || this.writing || this.timer) return;
    const wait = Math.max(0, this.lastWriteAt + this.intervalMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, wait);
  }

  private flush(): void {
    if (this.stopped || this.pending === undefined) return;
    const encoded = this.pending;
    const settles = this.settles;
    this.pending = undefined;
    this.settles = [];
    this.writing = true;
    this.lastWriteAt = Date.now();
    let written: Promise<boolean>;
    try {
      written = this.write(encoded);
    } catch (error) {
      written = Promise.reject(error);
    }
    written
      .then(
        (held) => held || this.stop(),
        (error: unknown) => this.onError(error),
      )
      .finally(() => {
        this.writing = false;
        settles.forEach((settle) => settle());
        this.schedule();
      });
  }
}
