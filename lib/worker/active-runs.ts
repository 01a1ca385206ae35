import { LeaseLostError } from '../errors';
import type { LazyAbort } from '../execution/lazy.abort';

/** A run this process is executing. */
export interface ActiveRun {
  id: string;
  token: string;
  abort: LazyAbort;
}

/**
 * The runs in flight in this process: the local semaphore (its size against the worker
 * concurrency), the heartbeat's list, and what shutdown drains.
 */
export class ActiveRuns {
  private readonly runs = new Map<string, ActiveRun>();
  private waiters: Array<() => void> = [];

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

  /** Resolves when any run finishes, or after `timeoutMs`; `interrupt()` resolves it early. */
  whenOneFinishes(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      const forget = (waiter: () => void) => (this.waiters = this.waiters.filter((w) => w !== waiter));
      function done() {
        clearTimeout(timer);
        forget(done);
        resolve();
      }
      this.waiters.push(done);
    });
  }

  /** Wakes everyone in {@link whenOneFinishes} now. */
  interrupt(): void {
    const waiters = this.waiters;
    this.waiters = [];
    waiters.forEach((wake) => wake());
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
