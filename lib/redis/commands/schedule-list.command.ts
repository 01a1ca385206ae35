import type { ScriptRunner } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** One page of schedules in id order (lua/schedule-list.lua). */
export interface ScheduleListRequest {
  /** Only this workflow's schedules. */
  workflow?: string;
  /** The last id of the previous page, or '' to start. */
  cursor: string;
  limit: number;
}

export interface ScheduleRows {
  /** Each schedule's hash, flat: field, value, … */
  rows: Array<{ id: string; flat: string[] }>;
  /** The next page's cursor; null after the last page. */
  next: string | null;
}

/** Reads one page of schedules with their hashes (a read: repeating it is harmless). */
export async function listSchedules(scripts: ScriptRunner, keys: RedisKeys, request: ScheduleListRequest): Promise<ScheduleRows> {
  const key = request.workflow === undefined ? keys.schedules : keys.workflow(request.workflow, 'schedules');
  const [next, ...rows] = await scripts.run<[string, ...string[][]]>('schedule-list', [key], [keys.base, request.cursor, request.limit], {
    idempotent: true,
  });
  return { rows: rows.map(([id, ...flat]) => ({ id, flat })), next: next === '' ? null : next };
}
