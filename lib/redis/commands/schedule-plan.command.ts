import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** A worker's answer to a plan request of reserve (see PlanRequest). */
export interface SchedulePlan {
  id: string;
  /** The rev the request carried. */
  rev: string;
  mode: 'extend' | 'replan';
  /** The plan's tail ('extend') or the next fire ('replan', '' if none), as the request saw it. */
  seen: string;
  /** Occurrences (ascending ms). */
  times: number[];
}

/**
 * Writes a plan if the schedule is still as the request saw it (lua/schedule-plan.lua): true
 * written, false stale (nothing written). Repeating it is harmless.
 */
export async function writeSchedulePlan(scripts: LuaScripts, keys: RedisKeys, plan: SchedulePlan): Promise<boolean> {
  const reply = await scripts.run<number>(
    'schedule-plan',
    [keys.schedule(plan.id)],
    [keys.base, plan.id, plan.rev, plan.mode, plan.seen, plan.times.join(',')],
    { idempotent: true },
  );
  return reply === 1;
}
