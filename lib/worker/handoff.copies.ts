/** How many runs started from an enqueue's reply may wait for their published copy before old ones are looked for. */
const SWEEP_ABOVE = 32;

/**
 * The handoffs this worker started from its own process's enqueue replies (see LocalWorker),
 * until their published copy arrives on the handoff channel: that copy is the same handoff (same
 * run, same lease token), not a run to start again — the run may have finished by then. A copy
 * that never arrives (the subscriber connection dropped with it) is forgotten once its lease would
 * have expired.
 */
export class HandoffCopies {
  private readonly started = new Map<string, { token: string; at: number }>();

  constructor(private readonly leaseMs: number) {}

  /** A handoff started from an enqueue's reply: its published copy is to come. */
  startedFromReply(runId: string, token: string): void {
    if (this.started.size >= SWEEP_ABOVE) {
      const expired = Date.now() - this.leaseMs;
      for (const [id, entry] of this.started) if (entry.at < expired) this.started.delete(id);
    }
    this.started.set(runId, { token, at: Date.now() });
  }

  /** Whether a published handoff is the copy of one started from a reply (and forgets it). */
  isCopy(runId: string, token: string): boolean {
    if (this.started.get(runId)?.token !== token) return false;
    this.started.delete(runId);
    return true;
  }
}
