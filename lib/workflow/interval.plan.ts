/**
 * Interval schedules (`every: '5m'`): occurrences at `offsetMs + k × everyMs` since the Unix epoch.
 * Aligned to the epoch rather than to when the schedule was written, so every process derives the
 * same instants (as cron's are) and re-declaring it at each bootstrap never shifts them.
 *
 * Stored in the schedule hash's `cron` field as `@every <everyMs> <offsetMs>`: the planning code
 * (lib/workflow/cron.plan.ts) tells the two kinds apart by that prefix, and a worker of a release
 * without interval schedules fails to plan it with cron-parser's error — logged, nothing written,
 * asked again of another worker — rather than misreading it. Its reserve calls still fire the
 * occurrences already planned: firing (lua/includes/schedules.lua) never parses the pattern.
 */

/** The prefix that marks an interval pattern in a schedule's `cron` field. */
const INTERVAL_PREFIX = '@every ';

/** Shortest interval: cron's granularity is a second, and so is this. */
export const MIN_INTERVAL_MS = 1_000;

/** An interval schedule's timing. */
export interface Interval {
  everyMs: number;
  /** Phase, 0 ≤ offsetMs < everyMs: the occurrences are `offsetMs + k × everyMs` since the epoch. */
  offsetMs: number;
}

/** The `cron` field's text for an interval. */
export function intervalText({ everyMs, offsetMs }: Interval): string {
  return `${INTERVAL_PREFIX}${everyMs} ${offsetMs}`;
}

/** The interval a stored pattern names, or undefined for a cron expression. */
export function parseInterval(text: string): Interval | undefined {
  if (!text.startsWith(INTERVAL_PREFIX)) return undefined;
  const [everyMs, offsetMs] = text.slice(INTERVAL_PREFIX.length).split(' ').map(Number);
  return { everyMs, offsetMs: offsetMs || 0 };
}

/** Index of the last occurrence at or before `ms` (may be negative before the epoch's first). */
function indexAtOrBefore({ everyMs, offsetMs }: Interval, ms: number): number {
  return Math.floor((ms - offsetMs) / everyMs);
}

/** The next `count` occurrences strictly after `afterMs`, ascending. */
export function intervalOccurrencesAfter(interval: Interval, afterMs: number, count: number): number[] {
  const first = indexAtOrBefore(interval, afterMs) + 1;
  return Array.from({ length: count }, (_, i) => interval.offsetMs + (first + i) * interval.everyMs);
}

/**
 * The latest `max` occurrences in (floorMs, nowMs], ascending: what a schedule owes after
 * downtime (see missedOccurrences in cron.plan.ts). Arithmetic, so a long downtime costs nothing.
 */
export function intervalMissed(interval: Interval, floorMs: number, nowMs: number, max: number): number[] {
  if (max <= 0) return [];
  const last = indexAtOrBefore(interval, nowMs);
  const first = Math.max(indexAtOrBefore(interval, floorMs) + 1, last - max + 1);
  const owed: number[] = [];
  for (let k = first; k <= last; k++) owed.push(interval.offsetMs + k * interval.everyMs);
  return owed;
}
