import type { ActiveRuns } from './active-runs';

/** How many runs started from an enqueue's reply may wait for their published copy before old ones are looked for. */
const SWEEP_ABOVE = 32;

/**
 * The two copies of a handoff to this worker from its own process's enqueue (see LocalWorker): the
 * enqueue's reply and the message published on the handoff channel (same run, same lease token).
 * Whichever comes first starts the run; the other is passed over. The published copy usually
 * comes second, maybe after the run finished, so the handoffs started from a reply are kept until
 * it arrives (or, if it never does — the subscriber connection dropped with it — until their lease
 * would have expired). Were the published copy read first, the run is still in flight when the
 * reply's comes: its commit's reply comes after the enqueue's, on the same connection.
 */
export class HandoffCopies {
  private readonly started = new Map<string, { token: string; at: number }>();

  constructor(
    private readonly leaseMs: number,
    private readonly active: ActiveRuns,
  ) {}

  /** A handoff from an enqueue's reply: whether to start it (false: its published copy came first). */
  startedFromReply(runId: string, token: string): boolean {
    if (this.active.get(runId)?.token === token) return false;
    const now = Date.now();
    if (this.started.size >= SWEEP_ABOVE) {
      // Oldest first (a Map keeps insertion order, and each entry is inserted anew): the sweep
      // stops at the first entry still in its lease, so a run pays for what expired, not for all
      // that wait. Copies that never come (a subscriber connection that dropped them) pile up.
      const expired = now - this.leaseMs;
      for (const [id, entry] of this.started) {
        if (entry.at >= expired) break;
        this.started.delete(id);
      }
    }
    this.started.delete(runId);
    this.started.set(runId, { token, at: now });
    return true;
  }

  /** Whether a published handoff is the copy of one started from a reply (and forgets it). */
  isCopy(runId: string, token: string): boolean {
    if (this.started.get(runId)?.token !== token) return false;
    this.started.delete(runId);
    return true;
  }
}
