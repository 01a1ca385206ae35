import { setImmediate as afterThisTurn } from 'node:timers/promises';
import type { ActiveRuns } from './active-runs';

/**
 * Longest the runs claimed by a worker's first reserve keep its idle-time connections closed.
 * A run enqueued meanwhile waits at most this much longer: the handoff published to this worker
 * reaches no subscriber, so the enqueue queues it (lua/includes/enqueue.lua deliverHandoff), and a
 * complete call's refill or the first blocking read claims it. A cancel published meanwhile is
 * heard by the lease beat the worker makes once its channels are subscribed (lua/extend-leases.lua
 * reports the run cancelled), as after any subscriber reconnect.
 */
export const BOOT_QUIET_MAX_MS = 50;

/**
 * When a worker's boot is over as far as the connections it needs only while idle go: the
 * blocking connection (its wake-list reads) and the subscriber (cancels, handoffs). Opening
 * each costs the event loop a connect, a handshake and its replies, about as much as claiming
 * and committing a short run: done while the boot's first runs are in flight, that work sat
 * between their claim and their commit, in each of their replies' turns. So they open once the
 * runs the boot's first reserve claimed are done (committed), after that turn's I/O, or
 * {@link BOOT_QUIET_MAX_MS} after that reserve's reply, whichever comes first; at once if it
 * claimed nothing; and at stop (so a worker whose start was put off still subscribes). A first
 * reserve that Redis refused (the bootstrap's declarations were not written yet) or that failed
 * leaves the decision to the next one, which the loop sends at once: otherwise, in a namespace
 * new to the workflow, the connections opened while that next reserve's runs were in flight.
 */
export class BootQuiet {
  /** Resolves once the boot is over (see the class). */
  readonly over: Promise<void>;
  private markOver!: () => void;
  private ended = false;

  /** @param maxMs how long after the first reserve's reply the boot is over at the latest */
  constructor(private readonly maxMs = BOOT_QUIET_MAX_MS) {
    this.over = new Promise((resolve) => (this.markOver = resolve));
  }

  /** Whether {@link over} has resolved: the steady state's check, with no await. */
  get isOver(): boolean {
    return this.ended;
  }

  /** The boot's first reserve launched `claimed` runs (none if it failed). */
  claimed(claimed: number, active: ActiveRuns): void {
    if (this.ended) return;
    if (claimed === 0) return this.end();
    void active
      .drained(this.maxMs)
      .then(() => afterThisTurn())
      .then(() => this.end());
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.markOver();
  }
}
