import type { ScriptRunner } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** 'missing' no such schedule; 'done'; 'unchanged' nothing to do (already paused / not paused); 'stale' (resume) the schedule changed since it was read. */
export type ScheduleControlOutcome = 'missing' | 'done' | 'unchanged' | 'stale';

/** Resuming takes a plan computed at the schedule's `rev` (compare-and-set: see lua/schedule-control.lua). */
export type ScheduleControl = { op: 'pause' | 'remove' } | { op: 'resume'; rev: string; plan: number[] };

const OUTCOMES: Record<string, ScheduleControlOutcome> = { '0': 'missing', '1': 'done', '2': 'unchanged', '-1': 'stale' };

/** Pauses, resumes or removes one schedule, hash and index together. Repeating it is harmless. */
export async function controlSchedule(
  scripts: ScriptRunner,
  keys: RedisKeys,
  id: string,
  control: ScheduleControl,
): Promise<ScheduleControlOutcome> {
  const extra = control.op === 'resume' ? [control.rev, control.plan.join(',')] : [];
  const reply = await scripts.run<number>('schedule-control', [keys.schedules, keys.schedule(id)], [keys.base, id, control.op, ...extra], {
    idempotent: true,
  });
  return OUTCOMES[String(reply)];
}
