import { Logger } from '@nestjs/common';
import { LeaseLostError } from '../errors';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import type { ActiveRun, ActiveRuns } from './active-runs';

/** Runs per extend call, so one heartbeat never holds Redis for long. */
const CHUNK = 500;

/**
 * Extends the leases of every run in flight, one script call per beat (per 500 runs), every
 * third of the lease. A run whose lease is gone (it stalled, another worker took it) has its
 * signal aborted with `LeaseLostError`.
 */
export class LeaseHeartbeat {
  private readonly logger = new Logger('Sluice');
  private timer?: NodeJS.Timeout;

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

  beat(): Promise<void> {
    return this.extend(this.active.list());
  }

  /** Extends the given runs' leases now; aborts those whose lease is gone. */
  async extend(runs: ActiveRun[]): Promise<void> {
    for (let i = 0; i < runs.length; i += CHUNK) {
      const args = runs.slice(i, i + CHUNK).flatMap((run) => [run.id, run.token]);
      try {
        const lost = await this.scripts.run<string[]>('extend-leases', [this.keys.leases], [this.keys.base, this.lockMs, ...args]);
        for (const id of lost) this.active.get(id)?.abort.abort(new LeaseLostError(id));
      } catch (error) {
        this.logger.warn(`Lease heartbeat failed: ${(error as Error).message}`);
      }
    }
  }
}
