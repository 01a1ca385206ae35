import { Injectable, Logger } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';

/** How long after the last read of a dashboard completed runs stay indexed for it. */
export const COMPLETED_WATCH_MS = 15 * 60_000;
/** How often one process renews the watch while its pages are read (a write a minute at most). */
const RENEW_EVERY_MS = 60_000;
/** The limits-hash field the scripts read (countFinished in lua/includes/finish.lua): until when, in ms of Redis time. */
export const COMPLETED_WATCH_FIELD = 'completed-watch';

/**
 * Completed runs are the one finish every run has, so unless a workflow asks for it
 * (`indexCompleted`, `keep.completed`) they are not indexed: the hot path pays nothing for a list
 * nobody reads. While a dashboard is read, it asks for them: it writes until when (Redis time,
 * 15 minutes on) in the limits hash, a field the completing script reads in the `HMGET` it already
 * makes, so the runs that complete meanwhile enter their workflow's finish index (two commands a
 * completing call and workflow) and the page lists them. A fleet nobody watches pays nothing.
 */
@Injectable()
export class CompletedWatch {
  private readonly logger = new Logger('SluiceDashboard');
  private renewedAt = -Infinity;
  private pending?: Promise<void>;
  private target?: { connections: RedisConnections; keys: RedisKeys };

  constructor(private readonly moduleRef: ModuleRef) {}

  /** Called by the page's reads: renews the watch when it is a minute old. Never fails the read. */
  touch(): Promise<void> {
    if (Date.now() - this.renewedAt < RENEW_EVERY_MS) return Promise.resolve();
    return (this.pending ??= this.renew().finally(() => (this.pending = undefined)));
  }

  private async renew(): Promise<void> {
    const { connections, keys } = (this.target ??= this.resolve());
    try {
      // Redis's clock, as the scripts compare with it; one bounded call (TIME, then HSET).
      await connections.command.call(
        'dashboard completed-watch',
        async (redis) => {
          const [seconds, micros] = await redis.time();
          await redis.hset(
            keys.limits,
            COMPLETED_WATCH_FIELD,
            Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) + COMPLETED_WATCH_MS,
          );
        },
        { idempotent: true },
      );
      this.renewedAt = Date.now();
    } catch (error) {
      // Redis away: the page reports its own read errors; the watch is renewed on the next read.
      this.logger.debug(`completed-runs watch not renewed: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  private resolve(): { connections: RedisConnections; keys: RedisKeys } {
    return { connections: this.moduleRef.get(RedisConnections, { strict: false }), keys: this.moduleRef.get(RedisKeys, { strict: false }) };
  }
}
