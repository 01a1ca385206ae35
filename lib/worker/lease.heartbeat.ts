import { Logger } from '@nestjs/common';
import { LeaseLostError, LeaseUnconfirmedError, type RunErrorInfo } from '../errors';
import { cancelledRunError } from '../errors/cancel.recorded';
import { extendLeases } from '../redis/commands/extend-leases.command';
import { decodePayload } from '../redis/payload.codec';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import { OutageLog } from '../util/outage-log';
import type { ActiveRun, ActiveRuns } from './active-runs';

/** Runs per extend call, so one heartbeat never holds Redis for long. */
const CHUNK = 500;

/**
 * Extends the leases of every run in flight, one script call per beat (per 500 runs), every
 * third of the lease. A run whose lease is gone (it stalled, another worker took it) has its
 * signal aborted with `LeaseLostError` — only the attempt whose token lost it, never a newer
 * attempt of the same run in this process (a cancelled run's with `RunCancelledError`). A run leaves the active set when its attempt ends
 * (or its commit gives up), and from then on its lease is no longer renewed.
 *
 * While beats fail (Redis unreachable), nobody can say the lease was lost, and it may lapse: the
 * stalled scan then gives the run to another worker as soon as Redis is back, and two attempts
 * would execute its steps side by side until this worker's next beat heard of it. So a run whose
 * lease no beat renewed for its length (less a tenth, for the claim's own round trip) has its
 * attempt stopped with `LeaseUnconfirmedError` then, by a timer that exists only while beats fail.
 */
export class LeaseHeartbeat {
  private readonly logger = new Logger('Sluice');
  /** During an outage every beat fails: one line, then summaries, then one when beats work again. */
  private readonly failures = new OutageLog(this.logger);
  private timer?: NodeJS.Timeout;
  private beating = false;
  /** Whether the latest beat failed in part (see {@link expireUnconfirmed}). */
  private failing = false;
  /** Set while beats fail: the stop of the runs whose lease went unrenewed for its length. */
  private expiry?: NodeJS.Timeout;

  constructor(
    private readonly scripts: LuaScripts,
    private readonly keys: RedisKeys,
    private readonly active: ActiveRuns,
    private readonly lockMs: number,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.beat(), Math.max(1, Math.floor(this.lockMs / 3)));
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    clearTimeout(this.expiry);
  }

  /** One beat; skipped while the previous one is still waiting for Redis (each call is bounded). */
  async beat(): Promise<void> {
    if (this.beating) return;
    this.beating = true;
    try {
      this.failing = !(await this.extend(this.active.list()));
      if (this.failing || this.expiry) this.expireUnconfirmed();
    } finally {
      this.beating = false;
    }
  }

  /** Extends the given runs' leases now; aborts the attempts whose lease is gone. Resolves whether every call reached Redis. */
  async extend(runs: ActiveRun[]): Promise<boolean> {
    let reached = true;
    for (let i = 0; i < runs.length; i += CHUNK) {
      const chunk = runs.slice(i, i + CHUNK);
      const sentAt = Date.now();
      try {
        // A lease must be renewed well within its length, so one beat gets a third of it.
        const lost = await extendLeases(this.scripts, this.keys, chunk, this.lockMs, Math.max(1, Math.floor(this.lockMs / 3)));
        for (const run of chunk) run.leaseConfirmedAt = sentAt;
        this.failures.recovered('Lease heartbeat recovered');
        for (const lease of lost) {
          const run = this.active.get(lease.runId);
          // Normally the cancel channel told the worker already; this is the backstop if that
          // message was lost or is still on its way (so the reason comes along).
          if (run?.token !== lease.token) continue;
          run.abort.abort(
            lease.cancelled
              ? cancelledRunError(run.id, decodePayload<RunErrorInfo | undefined>(lease.error || undefined))
              : new LeaseLostError(run.id),
          );
        }
      } catch (error) {
        reached = false;
        this.failures.warn(`Lease heartbeat failed: ${(error as Error).message}`);
      }
    }
    return reached;
  }

  /**
   * Stops the attempts whose lease no beat renewed for its length (less a tenth), and, while beats
   * fail, sets a timer for the next one to come to that.
   */
  private expireUnconfirmed(): void {
    clearTimeout(this.expiry);
    this.expiry = undefined;
    const now = Date.now();
    const holdsMs = this.lockMs - Math.floor(this.lockMs / 10);
    let next = Infinity;
    for (const run of this.active.list()) {
      if (run.abort.aborted) continue;
      const until = run.leaseConfirmedAt + holdsMs;
      if (until <= now) run.abort.abort(new LeaseUnconfirmedError(run.id, this.lockMs));
      else next = Math.min(next, until);
    }
    if (this.failing && next < Infinity) {
      this.expiry = setTimeout(() => this.expireUnconfirmed(), next - now);
      this.expiry.unref();
    }
  }
}
