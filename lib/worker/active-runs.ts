import { LeaseLostError } from '../errors';
import type { LazyAbort } from '../execution/lazy.abort';

/** A run this process is executing. */
export interface ActiveRun {
  id: string;
  token: string;
  abort: LazyAbort;
  /**
   * When (local clock) the lease last held for sure: the claim's arrival, then the sending of
   * each heartbeat that renewed it (see LeaseHeartbeat).
   */
  leaseConfirmedAt: number;
}

/** One wait of {@link ActiveRuns.whenOneFinishes}. */
interface Waiter {
  until?: () => boolean;
  wake(): void;
}

/**
 * The runs in flight in this process: the local semaphore (its size against the worker
 * concurrency), the heartbeat's list, and what shutdown drains.
 */
export class ActiveRuns {
  private readonly runs = new Map<string, ActiveRun>();
  private waiters: Waiter[] = [];

  get size(): number {
    return this.runs.size;
  }

  /**
   * Records a run in flight. If this process still runs an older attempt of it (its lease
   * expired, e.g. behind a blocked event loop, and this process claimed it again), that attempt
   * has lost its lease: its signal is aborted.
   */
  add(run: ActiveRun): void {
    const older = this.runs.get(run.id);
    if (older && older.token !== run.token) older.abort.abort(new LeaseLostError(run.id));
    this.runs.set(run.id, run);
  }

  /**
   * Forgets the run, if `token` is still the attempt on record: a stale attempt finishing late
   * must not drop the entry of a newer attempt of the same run in this process.
   */
  delete(id: string, token: string): void {
    if (this.runs.get(id)?.token !== token) return;
    this.runs.delete(id);
    this.interrupt();
  }

  get(id: string): ActiveRun | undefined {
    return this.runs.get(id);
  }

  list(): ActiveRun[] {
    return [...this.runs.values()];
  }

  /**
   * Resolves when any run finishes, or after `timeoutMs`; `interrupt()` resolves it early. With
   * `until`, a finish resolves it only once `until()` holds (the timeout still does): a saturated
   * worker waits for a free slot, and most finishes find theirs refilled already — waking, and
   * arming a timer for the next wait, at each one cost a timer per run.
   */
  whenOneFinishes(timeoutMs: number, until?: () => boolean): Promise<void> {
    return new Promise((resolve) => {
      const waiter: Waiter = { until, wake: () => undefined };
      const timer = setTimeout(() => waiter.wake(), timeoutMs);
      waiter.wake = () => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve();
      };
      this.waiters.push(waiter);
    });
  }

  /** Wakes everyone in {@link whenOneFinishes} now (those waiting `until` something, if it holds). */
  interrupt(): void {
    const { waiters } = this;
    // Runs once per finished run, mostly with the one loop waiting: no copy of the list for it.
    if (waiters.length === 1) {
      const waiter = waiters[0];
      if (!waiter.until || waiter.until()) waiter.wake();
      return;
    }
    for (const waiter of waiters.slice()) if (!waiter.until || waiter.until()) waiter.wake();
  }

  /** Resolves true once no run is in flight, false if `timeoutMs` passes first. */
  async drained(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.runs.size > 0) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await this.whenOneFinishes(left);
    }
    return true;
  }
}
