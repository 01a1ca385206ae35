import { InvalidOptionError, InvalidScheduleError } from '../errors';
import type { ScheduleDefinition } from '../interfaces/schedule.options';
import { checkInteger, toMilliseconds } from '../util/duration';
import { canonicalTimeZone, checkCronPattern, type CronPattern } from './cron.plan';
import { intervalText, MIN_INTERVAL_MS, parseInterval } from './interval.plan';

/** Longest interval: a year, so a plan of occurrences ahead stays within reach of a Date. */
const MAX_INTERVAL_MS = 366 * 86_400_000;

/**
 * Checks when a schedule fires — a `cron` expression (with `tz`) or an `every` interval (with
 * `offsetMs`), exactly one — and returns the pattern its occurrences are planned from, in the
 * canonical form stored and fingerprinted (a trimmed expression, a canonical zone name, an
 * interval's `@every` text). `seed`: the schedule id (cron's `H` fields).
 * @throws InvalidScheduleError, InvalidOptionError naming `field` and the value
 */
export function checkScheduleTiming(definition: ScheduleDefinition, field: string, seed: string): CronPattern {
  const { cron, tz, every, offsetMs } = definition as { cron?: unknown; tz?: unknown; every?: unknown; offsetMs?: unknown };
  if (every === undefined) {
    if (offsetMs !== undefined) throw new InvalidOptionError(`${field}.offsetMs`, 'applies to an interval schedule: give `every` with it');
    if (cron === undefined)
      throw new InvalidScheduleError(
        `${field}.cron`,
        'is required (a cron expression), unless `every` gives an interval such as "5m"; got undefined',
      );
    checkCronPattern({ cron: cron as string, tz: tz as string | undefined, seed }, field);
    return { cron: (cron as string).trim(), tz: tz === undefined ? undefined : canonicalTimeZone(tz, `${field}.tz`), seed };
  }
  if (cron !== undefined) throw new InvalidScheduleError(field, 'has both `cron` and `every`: give one');
  if (tz !== undefined) throw new InvalidOptionError(`${field}.tz`, 'applies to `cron` only: an interval runs on UTC milliseconds');
  if (typeof every !== 'number' && typeof every !== 'string')
    throw new InvalidScheduleError(`${field}.every`, `must be ms or a duration string such as "5m", got ${JSON.stringify(every)}`);
  const everyMs = toMilliseconds(every, `${field}.every`);
  if (everyMs < MIN_INTERVAL_MS || everyMs > MAX_INTERVAL_MS) {
    throw new InvalidScheduleError(`${field}.every`, `must be from 1s to 366d, got ${JSON.stringify(every)} (${everyMs} ms)`);
  }
  const offset = offsetMs === undefined ? 0 : checkInteger(offsetMs, `${field}.offsetMs`, 0, everyMs - 1);
  return { cron: intervalText({ everyMs, offsetMs: offset }), seed };
}

/** A pattern as log lines name it: `cron "0 * * * *" in Europe/Berlin`, `every 300000 ms`. */
export function timingText(pattern: CronPattern): string {
  const interval = parseInterval(pattern.cron);
  if (interval) return `every ${interval.everyMs} ms${interval.offsetMs ? ` at offset ${interval.offsetMs} ms` : ''}`;
  return `cron "${pattern.cron}"${pattern.tz ? ` in ${pattern.tz}` : ''}`;
}
