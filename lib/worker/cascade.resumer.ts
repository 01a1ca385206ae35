import { Logger } from '@nestjs/common';
import { cancelledErrorJson, sendCancel } from '../redis/commands/cancel.command';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';

/**
 * Finishes a cancel cascade whose caller went away between two of its calls (lua/cancel.lua
 * batches a cascade): the stalled scan of a reserve names one that has not moved for a whole
 * scan interval, and this carries it on, a batch a call, until none of it is left. Without it,
 * only a later cancel call would finish it, and the children left would run on unwatched.
 * One at a time per process; a failure is logged and the next scan names the cascade again.
 */
export class CascadeResumer {
  private readonly logger = new Logger('Sluice');
  private running?: string;

  constructor(
    private readonly scripts: LuaScripts,
    private readonly keys: RedisKeys,
    private readonly retentionMs: number,
  ) {}

  /** Carries on `runId`'s cascade in the background (nothing if one is being carried on already). */
  resume(runId: string): void {
    if (this.running !== undefined) return;
    this.running = runId;
    this.carryOn(runId)
      .catch((error: Error) =>
        this.logger.warn(`Carrying on the cancel cascade of run ${runId} failed (the next stalled scan tries again): ${error.message}`),
      )
      .finally(() => (this.running = undefined));
  }

  /** Resolves once the cascade is done. The run is cancelled already, so the record is only a formality: each child takes its parent's recorded error. */
  async carryOn(runId: string): Promise<number> {
    const record = { error: cancelledErrorJson(''), reason: '', retentionMs: this.retentionMs };
    let cancelled = 0;
    for (let left = 1; left > 0;) {
      const batch = await sendCancel(this.scripts, this.keys, runId, record);
      cancelled += batch.cascaded;
      left = batch.outcome === 'missing' ? 0 : batch.left;
    }
    if (cancelled > 0)
      this.logger.log(`Carried on the cancel cascade of run ${runId}, whose caller went away: ${cancelled} more run(s) cancelled`);
    return cancelled;
  }
}
