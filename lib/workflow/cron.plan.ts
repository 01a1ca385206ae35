import { CronExpressionParser } from 'cron-parser';
import { InvalidScheduleError } from '../errors';
import { intervalMissed, intervalOccurrencesAfter, parseInterval } from './interval.plan';

/** Occurrences a plan holds ahead of now: the window in which Redis can fire without a worker's help. */
export const PLAN_AHEAD = 16;
/** Longest cron expression accepted (cron-parser's own limit is far larger). */
const MAX_CRON_LENGTH = 256;

/** A parsed cron pattern with its time zone: what a schedule's occurrences are computed from. */
export interface CronPattern {
  /** A cron expression, or an interval's stored text (`@every <ms> <offset ms>`, see interval.plan.ts). */
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
  if (typeof cron !== 'string' || cron.trim() === '')
    throw new InvalidScheduleError(`${field}.cron`, `must be a non-empty cron expression string, got ${JSON.stringify(cron)}`);
  if (cron.length > MAX_CRON_LENGTH) throw new InvalidScheduleError(`${field}.cron`, `must be at most ${MAX_CRON_LENGTH} characters`);
  if (tz !== undefined) canonicalTimeZone(tz, `${field}.tz`);
  const fields = cron.trim().split(/\s+/).length;
  if (!cron.trim().startsWith('@') && fields !== 5 && fields !== 6) {
    throw new InvalidScheduleError(
      `${field}.cron`,
      `"${cron}" has ${fields} fields; expected 5 (minute hour day month weekday) or 6 (with seconds first)`,
    );
  }
  try {
    iterator(pattern, Date.now()).next();
  } catch (error) {
    throw new InvalidScheduleError(`${field}.cron`, `"${cron}" is not a valid cron expression: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/**
 * The canonical spelling of an IANA zone the runtime knows (`'europe/berlin'` → `'Europe/Berlin'`),
 * so equal schedules compare equal; `Intl` throws RangeError for any unknown zone.
 */
export function canonicalTimeZone(tz: unknown, field: string): string {
  if (typeof tz !== 'string' || tz === '')
    throw new InvalidScheduleError(field, `must be an IANA time zone name such as "Europe/Berlin", got ${JSON.stringify(tz)}`);
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: tz }).resolvedOptions().timeZone;
  } catch {
    throw new InvalidScheduleError(field, `unknown time zone "${tz}" (expected an IANA name such as "Europe/Berlin" or "UTC")`);
  }
}

/**
 * The next `count` occurrences strictly after `afterMs`, ascending (ms since the epoch). Time
 * zone rules are cron-parser's forward walk: a wall time skipped by a spring-forward change fires
 * once, at the same offset after the change (02:30 → 03:30); one repeated by a fall-back change
 * fires once, at its first instance (an hourly `0 * * * *` fires at both 02:00s: each is a
 * different hour). See {@link forward} for why the walk may start a little earlier.
 */
export function occurrencesAfter(pattern: CronPattern, afterMs: number, count: number): number[] {
  const interval = parseInterval(pattern.cron);
  if (interval) return intervalOccurrencesAfter(interval, afterMs, count);
  const out: number[] = [];
  for (const time of forward(pattern, afterMs)) {
    if (out.length >= count) break;
    out.push(time);
  }
  return out;
}

/**
 * What a schedule owes since its floor (its last fire, or when it was defined or resumed), as of
 * `nowMs`: the latest `max` occurrences in (floorMs, nowMs], ascending — the same instants the
 * forward plan would have fired. `max` 1 is the default `catchUp: 'latest'` (a backlog collapses
 * into one fire); `catchUp: 'all'` passes its bound. A long downtime costs about `max` steps, not
 * one per missed occurrence: cron-parser's `prev()` finds a starting point a few occurrences
 * further back, then the forward walk lists them (prev() alone disagrees with next() across DST
 * changes: it skips the shifted spring-forward time and returns both instances of a repeated one).
 */
export function missedOccurrences(pattern: CronPattern, floorMs: number, nowMs: number, max: number): number[] {
  const interval = parseInterval(pattern.cron);
  if (interval) return intervalMissed(interval, floorMs, nowMs, max);
  const back = iterator(pattern, nowMs + 1);
  let startMs = floorMs;
  for (let steps = 0; steps <= max + 2 && back.hasPrev(); steps++) {
    const time = back.prev().getTime();
    if (time <= floorMs) break;
    startMs = time - 1;
  }
  const owed: number[] = [];
  for (const time of forward(pattern, startMs)) {
    if (time > nowMs) break;
    owed.push(time);
  }
  return max > 0 ? owed.slice(-max) : [];
}

/**
 * A plan: the missed occurrences to fire now (see {@link missedOccurrences}; none for a new or
 * resumed schedule) followed by the next {@link PLAN_AHEAD} after now.
 */
export function planOccurrences(pattern: CronPattern, nowMs: number, missed?: { floorMs: number; max: number }): number[] {
  const owed = missed ? missedOccurrences(pattern, missed.floorMs, nowMs, missed.max) : [];
  return [...owed, ...occurrencesAfter(pattern, nowMs, PLAN_AHEAD)];
}

/** How far before a UTC-offset change a forward walk starts when it begins just after one. */
const TRANSITION_LOOKBACK_MS = 3 * 3_600_000;

/**
 * Occurrences strictly after `afterMs`, by cron-parser's forward walk. That walk fires a
 * repeated wall time once only if it starts before the repetition: started inside a fall-back
 * hour it would fire the repeated 02:30 a second time. So when the zone's offset changed in the
 * last three hours, the walk starts three hours back and skips what it finds up to `afterMs`.
 */
function* forward(pattern: CronPattern, afterMs: number): Generator<number> {
  const tz = pattern.tz ?? 'UTC';
  const lookback = offsetOf(tz, afterMs) !== offsetOf(tz, afterMs - TRANSITION_LOOKBACK_MS);
  const it = iterator(pattern, lookback ? afterMs - TRANSITION_LOOKBACK_MS : afterMs);
  while (it.hasNext()) {
    const time = it.next().getTime();
    if (time > afterMs) yield time;
  }
}

const offsetFormats = new Map<string, Intl.DateTimeFormat>();
function offsetOf(tz: string, ms: number): string {
  let format = offsetFormats.get(tz);
  if (!format) offsetFormats.set(tz, (format = new Intl.DateTimeFormat('en-US', { timeZone: tz, timeZoneName: 'longOffset' })));
  return format.formatToParts(ms).find((part) => part.type === 'timeZoneName')?.value ?? '';
}

/** Without a zone, UTC — never the process's own zone, so every worker plans the same instants. */
function iterator(pattern: CronPattern, currentMs: number) {
  return CronExpressionParser.parse(pattern.cron.trim(), {
    currentDate: new Date(currentMs),
    tz: pattern.tz ?? 'UTC',
    hashSeed: pattern.seed,
  });
}
