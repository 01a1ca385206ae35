import { Logger } from '@nestjs/common';
import type { PlanRequest } from '../redis/commands/reserve.command';
import { writeSchedulePlan } from '../redis/commands/schedule-plan.command';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import { ThrottledLog } from '../util/throttled-log';
import { occurrencesAfter, planOccurrences, PLAN_AHEAD } from '../workflow/cron.plan';

/**
 * The worker's side of cron schedules. Redis fires occurrences from a plan but cannot evaluate
 * cron; when a plan runs low (or out, after downtime) reserve asks for more in its reply, and
 * this computes them with cron-parser from the Redis time of that reply, and writes them with a
 * compare-and-set (lua/schedule-plan.lua). In the background: the worker loop never waits on it,
 * and a request lost with its worker is asked again by a later reserve.
 */
export class SchedulePlanner {
  private readonly log = new ThrottledLog(new Logger('Sluice'));
  /** Requests being answered, by schedule id: a second reserve asking again in the meantime is ignored. */
  private readonly inFlight = new Set<string>();

  constructor(
    private readonly scripts: LuaScripts,
    private readonly keys: RedisKeys,
  ) {}

  answer(redisNowMs: number, requests: PlanRequest[]): void {
    for (const request of requests) {
      const { id } = request;
      if (this.inFlight.has(id)) continue;
      this.inFlight.add(id);
      this.plan(redisNowMs, request)
        .catch((error: Error) =>
          this.log.warn(`Planning the occurrences of schedule "${id}" failed (${error.message}); a later reserve asks again`),
        )
        .finally(() => this.inFlight.delete(id));
    }
  }

  private async plan(nowMs: number, { id, cron, tz, rev, mode, seen, floor, max }: PlanRequest): Promise<void> {
    const pattern = { cron, tz: tz || undefined, seed: id };
    const times =
      mode === 'extend'
        ? occurrencesAfter(pattern, Number(seen), PLAN_AHEAD)
        : planOccurrences(pattern, nowMs, { floorMs: Number(floor), max: Number(max) });
    await writeSchedulePlan(this.scripts, this.keys, { id, rev, mode, seen, times });
  }
}
