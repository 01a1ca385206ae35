import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { InvalidInputError, InvalidScheduleError } from '../../lib/errors';
import {
  checkCronPattern,
  CronPattern,
  missedOccurrences,
  occurrencesAfter,
  planOccurrences,
  PLAN_AHEAD,
} from '../../lib/workflow/cron.plan';

/*
 * Tests that assert exact instants pass `tz` explicitly; the test at the end checks that no `tz`
 * means UTC whatever the process's own zone.
 */

const at = (iso: string): number => Date.parse(iso);
const iso = (times: number[]): string[] => times.map((t) => new Date(t).toISOString());
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const berlinDate = new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Berlin', year: 'numeric', month: '2-digit', day: '2-digit' });
const berlinTime = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
/** 'YYYY-MM-DD' of the Berlin calendar day an instant falls on. */
const berlinDay = (t: number): string => berlinDate.format(t);
/** 'HH:MM' Berlin wall time of an instant. */
const berlinClock = (t: number): string => berlinTime.format(t);

function countByBerlinDay(times: number[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const t of times) counts.set(berlinDay(t), (counts.get(berlinDay(t)) ?? 0) + 1);
  return counts;
}

function expectStrictlyIncreasing(times: number[]): void {
  for (let i = 1; i < times.length; i++) expect(times[i]).toBeGreaterThan(times[i - 1]);
  expect(new Set(times).size).toBe(times.length);
}

const utc = (cron: string, seed = 'seed'): CronPattern => ({ cron, tz: 'UTC', seed });
const berlin = (cron: string, seed = 'seed'): CronPattern => ({ cron, tz: 'Europe/Berlin', seed });

describe('PLAN_AHEAD', () => {
  it('is 16', () => {
    expect(PLAN_AHEAD).toBe(16);
  });
});

describe('occurrencesAfter: daylight saving time in Europe/Berlin', () => {
  const daily = berlin('30 2 * * *');

  it('fires a daily 02:30 once per Berlin day across spring-forward (02:30 does not exist on 2026-03-29)', () => {
    const times = occurrencesAfter(daily, at('2026-03-26T00:00:00Z'), 7);
    expect(times).toHaveLength(7);
    expectStrictlyIncreasing(times);
    expect([...countByBerlinDay(times)]).toEqual([
      ['2026-03-26', 1],
      ['2026-03-27', 1],
      ['2026-03-28', 1],
      ['2026-03-29', 1],
      ['2026-03-30', 1],
      ['2026-03-31', 1],
      ['2026-04-01', 1],
    ]);
    // On the change day it fires at 03:30 CEST, one wall-clock hour late; otherwise at 02:30.
    const changeDay = times.filter((t) => berlinDay(t) === '2026-03-29');
    expect(iso(changeDay)).toEqual(['2026-03-29T01:30:00.000Z']);
    expect(berlinClock(changeDay[0])).toBe('03:30');
    for (const t of times.filter((t) => berlinDay(t) !== '2026-03-29')) expect(berlinClock(t)).toBe('02:30');
    expect(iso(times)).toEqual([
      '2026-03-26T01:30:00.000Z', // CET, +01:00
      '2026-03-27T01:30:00.000Z',
      '2026-03-28T01:30:00.000Z',
      '2026-03-29T01:30:00.000Z', // 03:30 CEST
      '2026-03-30T00:30:00.000Z', // CEST, +02:00
      '2026-03-31T00:30:00.000Z',
      '2026-04-01T00:30:00.000Z',
    ]);
  });

  it('fires a daily 02:30 once per Berlin day across fall-back (02:30 happens twice on 2026-10-25), at its first instance', () => {
    const times = occurrencesAfter(daily, at('2026-10-22T00:00:00Z'), 7);
    expect(times).toHaveLength(7);
    expectStrictlyIncreasing(times);
    expect([...countByBerlinDay(times)]).toEqual([
      ['2026-10-22', 1],
      ['2026-10-23', 1],
      ['2026-10-24', 1],
      ['2026-10-25', 1],
      ['2026-10-26', 1],
      ['2026-10-27', 1],
      ['2026-10-28', 1],
    ]);
    for (const t of times) expect(berlinClock(t)).toBe('02:30');
    // 00:30Z is 02:30 CEST (the first 02:30); 01:30Z, 02:30 CET, is the repeat and must not fire.
    expect(iso(times.filter((t) => berlinDay(t) === '2026-10-25'))).toEqual(['2026-10-25T00:30:00.000Z']);
    expect(times).not.toContain(at('2026-10-25T01:30:00Z'));
    expect(iso(times)).toEqual([
      '2026-10-22T00:30:00.000Z',
      '2026-10-23T00:30:00.000Z',
      '2026-10-24T00:30:00.000Z',
      '2026-10-25T00:30:00.000Z',
      '2026-10-26T01:30:00.000Z',
      '2026-10-27T01:30:00.000Z',
      '2026-10-28T01:30:00.000Z',
    ]);
  });

  it('planning after the first 02:30 and before the clocks go back does not fire the repeated 02:30', () => {
    // From the first 02:30 (CEST) fired up to 02:59:59 CEST, the next is the following day.
    for (const start of ['2026-10-25T00:30:00Z', '2026-10-25T00:45:00Z', '2026-10-25T00:59:59Z']) {
      expect(iso(occurrencesAfter(daily, at(start), 1))).toEqual(['2026-10-26T01:30:00.000Z']);
    }
  });

  // Regression: cron-parser started inside the repeated hour, 02:00–02:59 CET (01:00Z–01:29Z),
  // returns the repeated 02:30 CET (01:30Z): a schedule replanned then (an upsert, a resume, the
  // end of downtime) fired a second time that Berlin day. The forward walk now starts earlier.
  it('planning from inside the repeated hour does not fire the repeated 02:30 again', () => {
    expect(iso(occurrencesAfter(daily, at('2026-10-25T01:00:00Z'), 1))).toEqual(['2026-10-26T01:30:00.000Z']);
  });

  it('fires an hourly schedule 25 times, strictly increasing and one hour apart, on the 25-hour fall-back day', () => {
    const dayStart = at('2026-10-24T22:00:00Z'); // 2026-10-25 00:00 CEST
    const dayEnd = at('2026-10-25T23:00:00Z'); // 2026-10-26 00:00 CET
    expect(dayEnd - dayStart).toBe(25 * HOUR);
    const times = occurrencesAfter(berlin('0 * * * *'), dayStart - 1, 30);
    expect(times).toHaveLength(30);
    expectStrictlyIncreasing(times);
    const day = times.filter((t) => berlinDay(t) === '2026-10-25');
    expect(day).toHaveLength(25);
    expect(day[0]).toBe(dayStart);
    expect(day[24]).toBe(dayEnd - HOUR);
    for (let i = 1; i < day.length; i++) expect(day[i] - day[i - 1]).toBe(HOUR);
    // The wall clock shows 02:00 twice.
    expect(day.map(berlinClock).filter((clock) => clock === '02:00')).toHaveLength(2);
  });

  it('fires an hourly schedule 23 times on the 23-hour spring-forward day, skipping the 02:00 that does not exist', () => {
    const dayStart = at('2026-03-28T23:00:00Z'); // 2026-03-29 00:00 CET
    const times = occurrencesAfter(berlin('0 * * * *'), dayStart - 1, 30);
    expectStrictlyIncreasing(times);
    const day = times.filter((t) => berlinDay(t) === '2026-03-29');
    expect(day).toHaveLength(23);
    for (let i = 1; i < day.length; i++) expect(day[i] - day[i - 1]).toBe(HOUR);
    expect(day.map(berlinClock)).not.toContain('02:00');
    expect(day.map(berlinClock).slice(0, 3)).toEqual(['00:00', '01:00', '03:00']);
  });
});

describe('occurrencesAfter', () => {
  it('is strictly after its start: an occurrence exactly at the start is not included', () => {
    expect(iso(occurrencesAfter(utc('0 0 * * *'), at('2026-01-01T00:00:00Z'), 2))).toEqual([
      '2026-01-02T00:00:00.000Z',
      '2026-01-03T00:00:00.000Z',
    ]);
    // One ms earlier, the occurrence at midnight is after the start and comes first.
    expect(iso(occurrencesAfter(utc('0 0 * * *'), at('2025-12-31T23:59:59.999Z'), 2))).toEqual([
      '2026-01-01T00:00:00.000Z',
      '2026-01-02T00:00:00.000Z',
    ]);
  });

  it('chains: starting from the last occurrence returned continues without a gap or repeat', () => {
    const pattern = utc('*/15 * * * *');
    const first = occurrencesAfter(pattern, at('2026-01-01T00:07:00Z'), 4);
    const next = occurrencesAfter(pattern, first[first.length - 1], 4);
    expect(iso([...first, ...next])).toEqual([
      '2026-01-01T00:15:00.000Z',
      '2026-01-01T00:30:00.000Z',
      '2026-01-01T00:45:00.000Z',
      '2026-01-01T01:00:00.000Z',
      '2026-01-01T01:15:00.000Z',
      '2026-01-01T01:30:00.000Z',
      '2026-01-01T01:45:00.000Z',
      '2026-01-01T02:00:00.000Z',
    ]);
  });

  it('returns exactly `count` occurrences, ascending', () => {
    expect(occurrencesAfter(utc('* * * * *'), 0, 0)).toEqual([]);
    const times = occurrencesAfter(utc('* * * * *'), at('2026-01-01T00:00:30Z'), 5);
    expect(iso(times)).toEqual([
      '2026-01-01T00:01:00.000Z',
      '2026-01-01T00:02:00.000Z',
      '2026-01-01T00:03:00.000Z',
      '2026-01-01T00:04:00.000Z',
      '2026-01-01T00:05:00.000Z',
    ]);
  });

  it('reads 5 fields as minute-first', () => {
    expect(iso(occurrencesAfter(utc('5 3 * * *'), at('2026-01-01T00:00:00Z'), 2))).toEqual([
      '2026-01-01T03:05:00.000Z',
      '2026-01-02T03:05:00.000Z',
    ]);
  });

  it('reads 6 fields as seconds-first', () => {
    expect(iso(occurrencesAfter(utc('*/10 * * * * *'), at('2026-01-01T00:00:05Z'), 3))).toEqual([
      '2026-01-01T00:00:10.000Z',
      '2026-01-01T00:00:20.000Z',
      '2026-01-01T00:00:30.000Z',
    ]);
    expect(iso(occurrencesAfter(utc('5 3 * * * *'), at('2026-01-01T00:00:00Z'), 2))).toEqual([
      '2026-01-01T00:03:05.000Z',
      '2026-01-01T01:03:05.000Z',
    ]);
  });

  it('starts at the next whole second after a start with milliseconds', () => {
    expect(iso(occurrencesAfter(utc('* * * * * *'), at('2026-01-01T00:00:00.500Z'), 2))).toEqual([
      '2026-01-01T00:00:01.000Z',
      '2026-01-01T00:00:02.000Z',
    ]);
  });

  it('accepts @hourly and @daily', () => {
    expect(iso(occurrencesAfter(utc('@hourly'), at('2026-01-01T00:30:00Z'), 2))).toEqual([
      '2026-01-01T01:00:00.000Z',
      '2026-01-01T02:00:00.000Z',
    ]);
    expect(iso(occurrencesAfter(utc('@daily'), at('2026-01-01T00:30:00Z'), 2))).toEqual([
      '2026-01-02T00:00:00.000Z',
      '2026-01-03T00:00:00.000Z',
    ]);
  });

  it('accepts weekday names and ranges (MON-FRI)', () => {
    // 2026-01-01 is a Thursday: Thu, Fri, then Mon–Fri, skipping the weekend.
    const times = occurrencesAfter(utc('0 9 * * MON-FRI'), at('2026-01-01T00:00:00Z'), 7);
    expect(iso(times)).toEqual([
      '2026-01-01T09:00:00.000Z',
      '2026-01-02T09:00:00.000Z',
      '2026-01-05T09:00:00.000Z',
      '2026-01-06T09:00:00.000Z',
      '2026-01-07T09:00:00.000Z',
      '2026-01-08T09:00:00.000Z',
      '2026-01-09T09:00:00.000Z',
    ]);
    for (const t of times) expect([0, 6]).not.toContain(new Date(t).getUTCDay());
  });

  it('accepts month names (JAN)', () => {
    expect(iso(occurrencesAfter(utc('0 0 1 JAN *'), at('2026-01-01T00:00:00Z'), 2))).toEqual([
      '2027-01-01T00:00:00.000Z',
      '2028-01-01T00:00:00.000Z',
    ]);
    expect(iso(occurrencesAfter(utc('0 12 15 JAN,JUL *'), at('2026-02-01T00:00:00Z'), 2))).toEqual([
      '2026-07-15T12:00:00.000Z',
      '2027-01-15T12:00:00.000Z',
    ]);
  });

  it('accepts L and #', () => {
    expect(iso(occurrencesAfter(utc('0 0 L * *'), at('2026-01-01T00:30:00Z'), 2))).toEqual([
      '2026-01-31T00:00:00.000Z',
      '2026-02-28T00:00:00.000Z',
    ]);
    // Second Monday of the month.
    expect(iso(occurrencesAfter(utc('0 0 * * 1#2'), at('2026-01-01T00:30:00Z'), 2))).toEqual([
      '2026-01-12T00:00:00.000Z',
      '2026-02-09T00:00:00.000Z',
    ]);
  });

  it('ignores surrounding whitespace', () => {
    expect(occurrencesAfter(utc('  0 * * * *\n'), at('2026-01-01T00:30:00Z'), 3)).toEqual(
      occurrencesAfter(utc('0 * * * *'), at('2026-01-01T00:30:00Z'), 3),
    );
  });

  it('reads the expression in its time zone', () => {
    const start = at('2026-01-01T12:00:00Z');
    expect(iso(occurrencesAfter(utc('0 0 * * *'), start, 1))).toEqual(['2026-01-02T00:00:00.000Z']);
    expect(iso(occurrencesAfter(berlin('0 0 * * *'), start, 1))).toEqual(['2026-01-01T23:00:00.000Z']);
    expect(iso(occurrencesAfter({ cron: '0 0 * * *', tz: 'America/New_York', seed: 's' }, start, 1))).toEqual(['2026-01-02T05:00:00.000Z']);
  });

  describe('H (hashed) fields', () => {
    const start = at('2026-01-01T00:00:00Z');

    it('gives the same times for the same seed', () => {
      const a = occurrencesAfter(utc('H H * * *', 'report.daily'), start, 5);
      const b = occurrencesAfter(utc('H H * * *', 'report.daily'), start, 5);
      expect(a).toHaveLength(5);
      expect(b).toEqual(a);
      // Daily: consecutive occurrences one day apart, at the same (hashed) time of day.
      for (let i = 1; i < a.length; i++) expect(a[i] - a[i - 1]).toBe(DAY);
    });

    it('can give different times for different seeds (the seed is the schedule id)', () => {
      const seeds = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
      const firsts = seeds.map((seed) => occurrencesAfter(utc('H H * * *', seed), start, 1)[0]);
      expect(new Set(firsts).size).toBeGreaterThan(1);
      expect(occurrencesAfter(utc('H H * * *', 'a'), start, 1)).not.toEqual(occurrencesAfter(utc('H H * * *', 'b'), start, 1));
    });

    it('keeps hashed values within their field (minute of H * * * * is fixed, 0–59)', () => {
      const times = occurrencesAfter(utc('H * * * *', 'x'), start, 4);
      const minutes = new Set(times.map((t) => new Date(t).getUTCMinutes()));
      expect(minutes.size).toBe(1);
      for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBe(HOUR);
    });
  });
});

describe('missedOccurrences', () => {
  const hourly = utc('0 * * * *');

  it('returns the occurrences in (floor, now], ascending', () => {
    const floor = at('2026-01-01T00:00:00Z');
    expect(iso(missedOccurrences(hourly, floor, at('2026-01-01T03:30:00Z'), 10))).toEqual([
      '2026-01-01T01:00:00.000Z',
      '2026-01-01T02:00:00.000Z',
      '2026-01-01T03:00:00.000Z',
    ]);
  });

  it('includes an occurrence exactly at now, and excludes one exactly at floor', () => {
    const floor = at('2026-01-01T00:00:00Z');
    const now = at('2026-01-01T03:00:00Z');
    const missed = missedOccurrences(hourly, floor, now, 10);
    expect(missed[missed.length - 1]).toBe(now);
    expect(missed).not.toContain(floor);
    expect(iso(missed)).toEqual(['2026-01-01T01:00:00.000Z', '2026-01-01T02:00:00.000Z', '2026-01-01T03:00:00.000Z']);
    // One ms before now, the occurrence at now is not yet owed.
    expect(iso(missedOccurrences(hourly, floor, now - 1, 10))).toEqual(['2026-01-01T01:00:00.000Z', '2026-01-01T02:00:00.000Z']);
    // One ms before floor, the occurrence at floor is owed.
    expect(iso(missedOccurrences(hourly, floor - 1, now, 10))).toEqual([
      '2026-01-01T00:00:00.000Z',
      '2026-01-01T01:00:00.000Z',
      '2026-01-01T02:00:00.000Z',
      '2026-01-01T03:00:00.000Z',
    ]);
  });

  it('handles floor and now with milliseconds', () => {
    expect(iso(missedOccurrences(hourly, at('2026-01-01T00:00:00.500Z'), at('2026-01-01T03:00:00.500Z'), 10))).toEqual([
      '2026-01-01T01:00:00.000Z',
      '2026-01-01T02:00:00.000Z',
      '2026-01-01T03:00:00.000Z',
    ]);
  });

  it('returns nothing when no occurrence falls in (floor, now]', () => {
    expect(missedOccurrences(hourly, at('2026-01-01T00:00:00Z'), at('2026-01-01T00:59:59.999Z'), 10)).toEqual([]);
    expect(missedOccurrences(hourly, at('2026-01-01T03:00:00Z'), at('2026-01-01T03:00:00Z'), 10)).toEqual([]);
  });

  it('returns at most `max`, the latest ones, ascending', () => {
    const floor = at('2026-01-01T00:00:00Z');
    const now = at('2026-01-01T10:30:00Z');
    expect(missedOccurrences(hourly, floor, now, 100)).toHaveLength(10);
    expect(iso(missedOccurrences(hourly, floor, now, 3))).toEqual([
      '2026-01-01T08:00:00.000Z',
      '2026-01-01T09:00:00.000Z',
      '2026-01-01T10:00:00.000Z',
    ]);
    // max 1 is catchUp 'latest': the backlog collapses into its latest occurrence.
    expect(iso(missedOccurrences(hourly, floor, now, 1))).toEqual(['2026-01-01T10:00:00.000Z']);
    expect(missedOccurrences(hourly, floor, now, 0)).toEqual([]);
  });

  it('returns the last 3 seconds of a year of downtime on an every-second cron with max 3', () => {
    // Walking forward from the floor would be ~31.5 million steps; this walks back 3.
    const missed = missedOccurrences(utc('* * * * * *'), at('2025-01-01T00:00:00Z'), at('2026-01-01T00:00:00Z'), 3);
    expect(iso(missed)).toEqual(['2025-12-31T23:59:58.000Z', '2025-12-31T23:59:59.000Z', '2026-01-01T00:00:00.000Z']);
  });

  it('agrees with occurrencesAfter outside DST changes', () => {
    const pattern = berlin('*/20 9-17 * * MON-FRI');
    const floor = at('2026-05-01T00:00:00Z');
    const now = at('2026-05-08T00:00:00Z');
    const forward = occurrencesAfter(pattern, floor, 1000).filter((t) => t <= now);
    expect(forward.length).toBeGreaterThan(50);
    expect(missedOccurrences(pattern, floor, now, 1000)).toEqual(forward);
  });

  // Regression: cron-parser's prev() across DST changes skips the 02:30 of the spring-forward day
  // and returns the repeated 02:30 of the fall-back day twice; missedOccurrences used it alone, so
  // `catchUp` after downtime disagreed with what the plan fires going forward.
  it('owes the spring-forward day its one occurrence (03:30 CEST), as occurrencesAfter fires it', () => {
    const daily = berlin('30 2 * * *');
    const floor = at('2026-03-26T00:00:00Z');
    const now = at('2026-04-01T12:00:00Z');
    const forward = occurrencesAfter(daily, floor, 7).filter((t) => t <= now);
    expect(missedOccurrences(daily, floor, now, 100)).toEqual(forward);
  });

  it('owes the fall-back day one 02:30, not both instances', () => {
    const daily = berlin('30 2 * * *');
    // Fired at the first 02:30 (00:30Z); down until 02:00Z: nothing more is owed that day.
    expect(missedOccurrences(daily, at('2026-10-25T00:30:00Z'), at('2026-10-25T02:00:00Z'), 1)).toEqual([]);
  });
});

describe('planOccurrences', () => {
  const hourly = utc('0 * * * *');

  it('returns the next PLAN_AHEAD occurrences strictly after now', () => {
    const now = at('2026-01-01T03:00:00Z');
    const plan = planOccurrences(hourly, now);
    expect(plan).toHaveLength(PLAN_AHEAD);
    expect(plan).toEqual(occurrencesAfter(hourly, now, PLAN_AHEAD));
    expect(plan[0]).toBe(at('2026-01-01T04:00:00Z'));
    expect(plan[PLAN_AHEAD - 1]).toBe(at('2026-01-01T19:00:00Z'));
    expectStrictlyIncreasing(plan);
  });

  it('with `missed`, puts the owed occurrences first, then PLAN_AHEAD future ones', () => {
    const now = at('2026-01-01T03:00:00Z');
    const plan = planOccurrences(hourly, now, { floorMs: at('2026-01-01T00:00:00Z'), max: 10 });
    expect(plan).toHaveLength(3 + PLAN_AHEAD);
    expect(iso(plan.slice(0, 3))).toEqual(['2026-01-01T01:00:00.000Z', '2026-01-01T02:00:00.000Z', '2026-01-01T03:00:00.000Z']);
    expect(plan.slice(3)).toEqual(occurrencesAfter(hourly, now, PLAN_AHEAD));
    // An occurrence exactly at now is owed once, not also planned.
    expectStrictlyIncreasing(plan);
  });

  it('bounds the owed part by `max`, keeping the latest', () => {
    const now = at('2026-01-02T00:00:00Z');
    const plan = planOccurrences(hourly, now, { floorMs: at('2026-01-01T00:00:00Z'), max: 2 });
    expect(plan).toHaveLength(2 + PLAN_AHEAD);
    expect(iso(plan.slice(0, 2))).toEqual(['2026-01-01T23:00:00.000Z', '2026-01-02T00:00:00.000Z']);
    expect(plan[2]).toBe(at('2026-01-02T01:00:00Z'));
  });

  it('with `missed` but nothing owed, is just the PLAN_AHEAD future ones', () => {
    const now = at('2026-01-01T03:30:00Z');
    expect(planOccurrences(hourly, now, { floorMs: at('2026-01-01T03:00:00Z'), max: 10 })).toEqual(planOccurrences(hourly, now));
  });
});

describe('checkCronPattern', () => {
  const ok = (cron: string, tz?: string) => () => checkCronPattern({ cron, tz, seed: 'id' }, 'opts');

  it.each([
    '0 * * * *',
    '*/10 * * * * *',
    '@hourly',
    '@daily',
    '@weekly',
    '@monthly',
    '@yearly',
    '0 9 * JAN MON-FRI',
    '0 0 L * *',
    '0 0 * * 1#2',
    'H H * * *',
    '0 0 29 2 *', // fires only in leap years, but fires
    '  0 * * * *  ',
  ])('accepts %p', (cron) => {
    expect(ok(cron)).not.toThrow();
  });

  it.each(['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Kolkata'])('accepts the time zone %p', (tz) => {
    expect(ok('0 * * * *', tz)).not.toThrow();
  });

  it('accepts a cron of exactly 256 characters', () => {
    const cron = `${Array.from({ length: 60 }, (_, i) => i).join(',')} ${Array.from({ length: 24 }, (_, i) => i).join(',')} 1,2,3,4,5,6,7,8,9,10 * *`;
    expect(cron).toHaveLength(256);
    expect(ok(cron)).not.toThrow();
  });

  function thrown(pattern: { cron: unknown; tz?: unknown }, field = 'opts'): InvalidScheduleError {
    try {
      checkCronPattern({ seed: 'id', ...pattern } as CronPattern, field);
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidScheduleError);
      expect(error).toBeInstanceOf(InvalidInputError);
      return error as InvalidScheduleError;
    }
    throw new Error(`expected ${JSON.stringify(pattern)} to be rejected`);
  }

  it.each([
    ['a value out of range', '61 * * * *', /"61 \* \* \* \*" is not a valid cron expression/],
    ['words', 'not a cron', /"not a cron" has 3 fields/],
    ['an empty string', '', /non-empty cron expression string, got ""/],
    ['only spaces', '   ', /non-empty cron expression string, got " {3}"/],
    ['7 fields', '0 0 0 * * * *', /"0 0 0 \* \* \* \*" has 7 fields/],
    ['4 fields', '0 * * *', /"0 \* \* \*" has 4 fields/],
    ['seconds out of range', '60 * * * * *', /"60 \* \* \* \* \*" is not a valid cron expression/],
    ['a month out of range', '0 0 * 13 *', /"0 0 \* 13 \*" is not a valid cron expression/],
    ['an unknown alias', '@fortnightly', /"@fortnightly" is not a valid cron expression/],
    ['a cron that never fires (Feb 30)', '0 0 30 2 *', /"0 0 30 2 \*" is not a valid cron expression/],
    ['a cron that never fires (Apr 31)', '0 0 31 4 *', /"0 0 31 4 \*" is not a valid cron expression/],
  ])('rejects %s as opts.cron', (_label, cron, message) => {
    const error = thrown({ cron });
    expect(error.field).toBe('opts.cron');
    expect(error.message).toMatch(/^opts\.cron: /);
    expect(error.message).toMatch(message);
  });

  it('keeps the cron-parser error as the cause', () => {
    const error = thrown({ cron: '61 * * * *' });
    expect(error.cause).toBeInstanceOf(Error);
    expect(error.message).toContain((error.cause as Error).message);
  });

  it.each([
    ['a number', 5, 'got 5'],
    ['null', null, 'got null'],
    ['undefined', undefined, 'got undefined'],
    ['an object', {}, 'got {}'],
  ])('rejects a non-string cron (%s)', (_label, cron, got) => {
    const error = thrown({ cron });
    expect(error.field).toBe('opts.cron');
    expect(error.message).toContain('must be a non-empty cron expression string');
    expect(error.message).toContain(got);
  });

  it('rejects a cron longer than 256 characters', () => {
    const cron = `${'0,'.repeat(124)}0 * * * *`;
    expect(cron).toHaveLength(257);
    const error = thrown({ cron });
    expect(error.field).toBe('opts.cron');
    expect(error.message).toBe('opts.cron: must be at most 256 characters');
  });

  it('rejects an unknown time zone as opts.tz, quoting it', () => {
    const error = thrown({ cron: '0 * * * *', tz: 'Mars/Olympus' });
    expect(error.field).toBe('opts.tz');
    expect(error.message).toMatch(/^opts\.tz: unknown time zone "Mars\/Olympus"/);
  });

  it.each([
    ['a number', 5, 'got 5'],
    ['null', null, 'got null'],
    ['an empty string', '', 'got ""'],
    ['an object', { zone: 'UTC' }, 'got {"zone":"UTC"}'],
  ])('rejects a time zone of the wrong type (%s)', (_label, tz, got) => {
    const error = thrown({ cron: '0 * * * *', tz });
    expect(error.field).toBe('opts.tz');
    expect(error.message).toContain('must be an IANA time zone name');
    expect(error.message).toContain(got);
  });

  it('prefixes the field it is given', () => {
    const error = thrown({ cron: 'bad' }, "@Workflow('w') schedules[2]");
    expect(error.field).toBe("@Workflow('w') schedules[2].cron");
    expect(error.message.startsWith("@Workflow('w') schedules[2].cron: ")).toBe(true);
    expect(thrown({ cron: '0 * * * *', tz: 'Nowhere/Land' }, 'x').field).toBe('x.tz');
  });
});

describe('a schedule without tz', () => {
  // Regression: without tz, cron-parser reads the expression in the process's local zone, so
  // workers in different zones planned different instants; no tz now means UTC, as documented.
  // Jest sandboxes process.env, so the code runs in a child process with TZ set.
  let withoutTz: number[];
  let withUtc: number[];

  beforeAll(() => {
    const script = [
      "const { occurrencesAfter } = require('./lib/workflow/cron.plan');",
      "const start = Date.parse('2026-01-01T00:00:00Z');",
      "process.stdout.write(JSON.stringify([occurrencesAfter({ cron: '0 * * * *', seed: 's' }, start, 3), occurrencesAfter({ cron: '0 * * * *', tz: 'UTC', seed: 's' }, start, 3)]));",
    ].join('\n');
    const child = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', '-e', script], {
      cwd: join(__dirname, '..', '..'),
      env: { ...process.env, TZ: 'Asia/Kolkata' },
      encoding: 'utf8',
    });
    if (child.status !== 0) throw new Error(`child failed: ${child.stderr}`);
    [withoutTz, withUtc] = JSON.parse(child.stdout) as [number[], number[]];
  });

  it('plans hourly occurrences in a child process running in Asia/Kolkata (+05:30)', () => {
    expect(withUtc).toEqual([at('2026-01-01T01:00:00Z'), at('2026-01-01T02:00:00Z'), at('2026-01-01T03:00:00Z')]);
    expect(withoutTz).toHaveLength(3);
  });

  it('fires at the same instants as tz UTC whatever the process time zone', () => {
    expect(withoutTz).toEqual(withUtc);
  });
});
