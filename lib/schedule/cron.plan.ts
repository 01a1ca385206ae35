import { CronExpressionParser } from 'cron-parser';
import { InvalidScheduleError } from '../errors';

/** Occurrences a plan holds ahead of now: the window in which Redis can fire without a worker's help. */
export const PLAN_AHEAD = 16;
/** Longest cron expression accepted (cron-parser's own limit is far larger). */
const MAX_CRON_LENGTH = 256;

/** A parsed cron pattern with its time zone: what a schedule's occurrences are computed from. */
export interface CronPattern {
  cron: string;
  /** IANA time zone, or undefined for UTC. */
  tz?: string;
  /** Seed of cron-parser's `H` (hashed) fields: the schedule id, so every process derives the same times. */
  seed: string;
}

/**
 * Checks a cron expression and time zone as `schedule()`, `@Workflow({ schedules })` and the
 * bootstrap do, and that the pattern fires at all within its plan: 5 fields (minute first) or 6
 * (seconds first), `@hourly`-style aliases, names such as `MON` and `JAN`, `L`, `#`, `H`.
 * @throws InvalidScheduleError naming `field` and the value
 */
export function checkCronPattern(pattern: CronPattern, field: string): void {
  const { cron, tz } = pattern;
  if (typeof cron !== 'string' || cron.trim() === '') throw new InvalidScheduleError(`${field}.cron`, `must be a non-empty cron expression string, got ${JSON.stringify(cron)}`);
  if (cron.length > MAX_CRON_LENGTH) throw new InvalidScheduleError(`${field}.cron`, `must be at most ${MAX_CRON_LENGTH} characters`);
  if (tz !== undefined) checkTimeZone(tz, `${field}.tz`);
  const fields = cron.trim().split(/\s+/).length;
  if (!cron.trim().startsWith('@') && fields !== 5 && fields !== 6) {
    throw new InvalidScheduleError(`${field}.cron`, `"${cron}" has ${fields} fields; expected 5 (minute hour day month weekday) or 6 (with seconds first)`);
  }
  try {
    iterator(pattern, Date.now()).next();
  } catch (error) {
    throw new InvalidScheduleError(`${field}.cron`, `"${cron}" is not a valid cron expression: ${(error as Error).message}`, { cause: error });
  }
}

/** An IANA zone name the runtime knows (`Intl` throws RangeError for any other). */
function checkTimeZone(tz: unknown, field: string): void {
  if (typeof tz !== 'string' || tz === '') throw new InvalidScheduleError(field, `must be an IANA time zone name such as "Europe/Berlin", got ${JSON.stringify(tz)}`);
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    throw new InvalidScheduleError(field, `unknown time zone "${tz}" (expected an IANA name such as "Europe/Berlin" or "UTC")`);
  }
}

/**
 * The next `count` occurrences strictly after `afterMs`, ascending (ms since the epoch). Time
 * zone rules are cron-parser's: a wall time skipped by a spring-forward change fires once, at the
 * same offset after the change (02:30 → 03:30); one repeated by a fall-back change fires once,
 * at its first instance.
 */
export function occurrencesAfter(pattern: CronPattern, afterMs: number, count: number): number[] {
  const it = iterator(pattern, afterMs);
  const out: number[] = [];
  while (out.length < count && it.hasNext()) out.push(it.next().getTime());
  return out;
}

/**
 * What a schedule owes since its floor (its last fire, or when it was defined or resumed), as of
 * `nowMs`: the latest `max` occurrences in (floorMs, nowMs], ascending. `max` 1 is the default
 * `catchUp: 'latest'` (a backlog collapses into one fire); `catchUp: 'all'` passes its bound.
 * Walks back from now, so a long downtime costs `max` steps, not one per missed occurrence.
 */
export function missedOccurrences(pattern: CronPattern, floorMs: number, nowMs: number, max: number): number[] {
  const it = iterator(pattern, nowMs + 1); // prev() is strictly before its date: include now
  const out: number[] = [];
  while (out.length < max && it.hasPrev()) {
    const time = it.prev().getTime();
    if (time <= floorMs) break;
    out.push(time);
  }
  return out.reverse();
}

/**
 * A plan: the missed occurrences to fire now (see {@link missedOccurrences}; none for a new or
 * resumed schedule) followed by the next {@link PLAN_AHEAD} after now.
 */
export function planOccurrences(pattern: CronPattern, nowMs: number, missed?: { floorMs: number; max: number }): number[] {
  const owed = missed ? missedOccurrences(pattern, missed.floorMs, nowMs, missed.max) : [];
  return [...owed, ...occurrencesAfter(pattern, nowMs, PLAN_AHEAD)];
}

function iterator(pattern: CronPattern, currentMs: number) {
  return CronExpressionParser.parse(pattern.cron.trim(), { currentDate: new Date(currentMs), tz: pattern.tz, hashSeed: pattern.seed });
}
