import { decodePayload } from '../redis/payload.codec';
import { parseInterval } from '../workflow/interval.plan';

/** A schedule as stored in Redis, from `getSchedule` / `listSchedules`. */
export interface ScheduleInfo<In = unknown> {
  /** The schedule's id, unique per namespace. */
  id: string;
  /** The name of the workflow it starts runs of. */
  workflow: string;
  /** The cron expression of a cron schedule (`undefined` for an interval schedule). */
  cron?: string;
  /** IANA time zone of a cron schedule, or `undefined` for UTC. */
  tz?: string;
  /** The interval of an `every` schedule, in ms (`undefined` for a cron schedule). */
  every?: number;
  /** The phase of an `every` schedule, in ms (0 when none was given). */
  offsetMs?: number;
  /** The input of every run it starts (`ScheduleRunOptions.input`). */
  input: In;
  /** The group of every run it starts; absent if none. */
  group?: string;
  /** The priority of every run it starts. */
  priority: number;
  /** `false`: an occurrence is skipped while the schedule's latest run has not finished (`ScheduleRunOptions.overlap`). */
  overlap: boolean;
  /** What fires after downtime: the latest missed occurrence, or all of them up to `catchUpLimit`. */
  catchUp: 'latest' | 'all';
  /** With `catchUp: 'all'`, most missed occurrences fired after downtime. */
  catchUpLimit: number;
  /** Paused (`QueueClient.pauseSchedule`): it fires nothing until resumed. */
  paused: boolean;
  /** The next occurrence that will fire (`null` while paused). */
  nextFireAt: Date | null;
  /** The next occurrences, `nextFireAt` first (at most 5; empty while paused). */
  upcoming: Date[];
  /** The latest occurrence fired (or skipped), if any. */
  lastFireAt: Date | null;
  /** Id of the run the latest fire started: `<schedule id>@<occurrence ms>`. */
  lastRunId: string | null;
  /** Runs started so far. */
  fired: number;
  /** Occurrences not fired: collapsed by `catchUp: 'latest'`, past `catchUpLimit`, or skipped by `overlap: false`. */
  skipped: number;
  /** `'code'`: declared on `@Workflow` (the latest worker bootstrap rewrites it; a newer version of the code removes it); `'api'`: made by `schedule()`. */
  source: 'code' | 'api';
  /**
   * `true` on a declared schedule whose definition was changed at runtime with `schedule()`:
   * worker bootstraps keep it until the code declares another definition than the one it replaced.
   */
  changedAtRuntime?: true;
  /** When the schedule was first written (Redis clock). */
  createdAt: Date;
  /** When it last changed: its definition written, or paused or resumed (Redis clock). */
  updatedAt: Date;
}

/** Upcoming occurrences shown per schedule. */
export const UPCOMING_SHOWN = 5;

/** A schedule hash given as a flat `field, value, …` list, as a record (no prototype). */
export function scheduleFields(flat: string[]): Record<string, string> {
  const h = Object.create(null) as Record<string, string>;
  for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i]] = flat[i + 1];
  return h;
}

/** Builds a ScheduleInfo from a schedule hash given as a flat `field, value, …` list, or `null` if empty. */
export function toScheduleInfo(id: string, flat: string[]): ScheduleInfo | null {
  const h = scheduleFields(flat);
  if (!h.workflow) return null;
  const date = (ms?: string) => (ms ? new Date(Number(ms)) : null);
  const paused = h.paused === '1';
  const upcoming =
    paused || !h.next ? [] : [h.next, ...(h.plan ? h.plan.split(',') : [])].slice(0, UPCOMING_SHOWN).map((ms) => new Date(Number(ms)));
  const interval = parseInterval(h.cron);
  return {
    id,
    workflow: h.workflow,
    ...(interval ? { every: interval.everyMs, offsetMs: interval.offsetMs } : { cron: h.cron }),
    ...(h.tz && { tz: h.tz }),
    input: decodePayload(h.input),
    ...(h.group && { group: h.group }),
    priority: Number(h.priority ?? 0),
    overlap: h.overlap !== '0',
    catchUp: h.catchUp === 'all' ? 'all' : 'latest',
    catchUpLimit: Number(h.catchUpLimit ?? 1),
    paused,
    nextFireAt: upcoming[0] ?? null,
    upcoming,
    lastFireAt: date(h.last),
    lastRunId: h.lastRun || null,
    fired: Number(h.fired ?? 0),
    skipped: Number(h.skipped ?? 0),
    source: h.source === 'code' ? 'code' : 'api',
    ...(h.overrides !== undefined && h.source === 'code' && { changedAtRuntime: true as const }),
    createdAt: new Date(Number(h.createdAt)),
    updatedAt: new Date(Number(h.updatedAt)),
  };
}
