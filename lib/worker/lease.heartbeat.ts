import { Logger } from '@nestjs/common';
import { LeaseLostError, type RunErrorInfo } from '../errors';
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
 */
export class LeaseHeartbeat {
  private readonly logger = new Logger('Sluice');
  /** During an outage every beat fails: one line, then summaries, then one when beats work again. */
  private readonly failures = new OutageLog(this.logger);
  private timer?: NodeJS.Timeout;
  private beating = false;

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
  }

  /** One beat; skipped while the previous one is still waiting for Redis (each call is bounded). */
  async beat(): Promise<void> {
    if (this.beating) return;
    this.beating = true;
    try {
      await this.extend(this.active.list());
    } finally {
      this.beating = false;
    }
  }

  /** Extends the given runs' leases now; aborts the attempts whose lease is gone. */
  async extend(runs: ActiveRun[]): Promise<void> {
    for (let i = 0; i < runs.length; i += CHUNK) {
      try {
        // A lease must be renewed well within its length, so one beat gets a third of it.
        const lost = await extendLeases(
          this.scripts,
          this.keys,
          runs.slice(i, i + CHUNK),
          this.lockMs,
          Math.max(1, Math.floor(this.lockMs / 3)),
        );
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
        this.failures.warn(`Lease heartbeat failed: ${(error as Error).message}`);
      }
    }
  }
}
