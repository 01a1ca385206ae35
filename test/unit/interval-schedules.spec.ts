import 'reflect-metadata';
import { InvalidOptionError, InvalidScheduleError } from '../../lib/errors';
import type { ScheduleDefinition } from '../../lib/interfaces/schedule.options';
import { toScheduleInfo } from '../../lib/schedule/schedule-info';
import { SluiceTesting } from '../../lib/testing';
import { missedOccurrences, occurrencesAfter, planOccurrences, PLAN_AHEAD } from '../../lib/workflow/cron.plan';
import { intervalText, parseInterval } from '../../lib/workflow/interval.plan';
import { buildScheduleSpec, checkDeclaredSchedules } from '../../lib/workflow/schedule.check';

/** Interval schedules (`every`): their checks, stored form and planned occurrences. */
const build = (definition: unknown, id = 'tick') =>
  buildScheduleSpec(id, { name: 'tick', attempts: 3 }, definition as ScheduleDefinition, 'opts', 1 << 20);
const pattern = (everyMs: number, offsetMs = 0) => ({ cron: intervalText({ everyMs, offsetMs }), seed: 'tick' });

describe('every: checks', () => {
  it.each([
    [{ every: '5m' }, 300_000, 0],
    [{ every: 90_000 }, 90_000, 0],
    [{ every: '1h', offsetMs: 15 * 60_000 }, 3_600_000, 900_000],
    [{ every: '1s' }, 1_000, 0],
  ])('%j is stored as an interval of %i ms at offset %i', (definition, everyMs, offsetMs) => {
    const spec = build(definition);
    expect(spec.pattern).toEqual({ cron: `@every ${everyMs} ${offsetMs}`, seed: 'tick' });
    expect(parseInterval(spec.pattern.cron)).toEqual({ everyMs, offsetMs });
  });

  it('an interval and the same interval written otherwise have one fingerprint; another offset another', () => {
    expect(build({ every: '5m' }).fingerprint).toBe(build({ every: 300_000 }).fingerprint);
    expect(build({ every: '5m', offsetMs: 1 }).fingerprint).not.toBe(build({ every: '5m' }).fingerprint);
  });

  it.each([
    [{ every: '5m', cron: '* * * * *' }, InvalidScheduleError, /both `cron` and `every`/],
    [{}, InvalidScheduleError, /opts\.cron: is required.*unless `every`/],
    [{ every: '5m', tz: 'Europe/Berlin' }, InvalidOptionError, /opts\.tz: applies to `cron` only/],
    [{ cron: '* * * * *', offsetMs: 5 }, InvalidOptionError, /opts\.offsetMs: applies to an interval/],
    [{ every: '500ms' }, InvalidScheduleError, /opts\.every: must be from 1s to 366d/],
    [{ every: '400d' }, InvalidScheduleError, /opts\.every: must be from 1s to 366d/],
    [{ every: 'soon' }, InvalidOptionError, /opts\.every: "soon" is not a duration/],
    [{ every: true }, InvalidScheduleError, /opts\.every: must be ms or a duration/],
    [{ every: '1m', offsetMs: 60_000 }, InvalidOptionError, /opts\.offsetMs: must be an integer from 0 to 59999/],
    [{ every: '1m', offsetMs: -1 }, InvalidOptionError, /opts\.offsetMs/],
    [{ every: '1m', offset: 5 }, InvalidOptionError, /opts\.offset: .*did you mean `offsetMs`/],
  ])('%j is refused', (definition, type, message) => {
    expect(() => build(definition)).toThrow(type);
    expect(() => build(definition)).toThrow(message);
  });

  it('declared on @Workflow, checked alike', () => {
    expect(checkDeclaredSchedules('tick', [{ every: '10s' }])).toEqual([{ every: '10s', id: 'tick' }]);
    expect(() => checkDeclaredSchedules('tick', [{ every: '10s', tz: 'UTC' }])).toThrow(/schedules\[0\]\.tz/);
  });
});

describe('every: occurrences', () => {
  it('are aligned to the epoch plus the offset, strictly after the given time', () => {
    expect(occurrencesAfter(pattern(60_000), 120_000, 3)).toEqual([180_000, 240_000, 300_000]);
    expect(occurrencesAfter(pattern(60_000), 119_999, 2)).toEqual([120_000, 180_000]);
    expect(occurrencesAfter(pattern(60_000, 15_000), 120_000, 2)).toEqual([135_000, 195_000]);
  });

  it('a plan holds PLAN_AHEAD occurrences after now', () => {
    const now = 1_700_000_000_123;
    const plan = planOccurrences(pattern(300_000), now);
    expect(plan).toHaveLength(PLAN_AHEAD);
    expect(plan[0]).toBe(Math.ceil(now / 300_000) * 300_000);
    expect(plan.every((t, i) => i === 0 || t - plan[i - 1] === 300_000)).toBe(true);
  });

  it('what downtime owes: the latest max occurrences in (floor, now], in constant time for any backlog', () => {
    expect(missedOccurrences(pattern(1_000), 10_000, 15_500, 1)).toEqual([15_000]);
    expect(missedOccurrences(pattern(1_000), 10_000, 15_500, 3)).toEqual([13_000, 14_000, 15_000]);
    expect(missedOccurrences(pattern(1_000), 10_000, 15_500, 100)).toEqual([11_000, 12_000, 13_000, 14_000, 15_000]);
    expect(missedOccurrences(pattern(1_000), 10_000, 10_999, 5)).toEqual([]);
    expect(missedOccurrences(pattern(1_000), 10_000, 15_500, 0)).toEqual([]);
    // Ten years of one-second ticks missed: still only the latest one, at once.
    const tenYears = 10 * 365 * 86_400_000;
    expect(missedOccurrences(pattern(1_000), 0, tenYears + 500, 1)).toEqual([tenYears]);
  });

  it('a resumed plan with catch-up lists the owed ones first, then the plan ahead', () => {
    const plan = planOccurrences(pattern(1_000), 15_500, { floorMs: 12_000, max: 10 });
    expect(plan.slice(0, 4)).toEqual([13_000, 14_000, 15_000, 16_000]);
  });

  it('SluiceTesting.nextFireTimes plans an interval as a worker does', () => {
    expect(SluiceTesting.nextFireTimes({ id: 'x', every: '1m', offsetMs: 5_000 }, 0, 2).map((d) => d.getTime())).toEqual([5_000, 65_000]);
    expect(() => SluiceTesting.nextFireTimes({ id: 'x', every: '10ms' }, 0)).toThrow(InvalidScheduleError);
  });
});

describe('every: ScheduleInfo', () => {
  it('reads the stored interval as every/offsetMs and no cron', () => {
    const flat = ['workflow', 'tick', 'cron', '@every 300000 15000', 'input', 'null', 'createdAt', '1', 'updatedAt', '1'];
    const info = toScheduleInfo('tick', flat)!;
    expect(info).toMatchObject({ every: 300_000, offsetMs: 15_000 });
    expect(info).not.toHaveProperty('cron');
    expect(toScheduleInfo('c', ['workflow', 'w', 'cron', '0 * * * *', 'input', 'null'])).toMatchObject({ cron: '0 * * * *' });
  });
});

describe('every: a release without intervals', () => {
  it("cannot misread the stored text: cron-parser refuses it, so such a worker's planning fails and another worker's plans", async () => {
    const { CronExpressionParser } = await import('cron-parser');
    for (const text of [intervalText({ everyMs: 300_000, offsetMs: 0 }), intervalText({ everyMs: 1_000, offsetMs: 500 })]) {
      expect(() => CronExpressionParser.parse(text, { tz: 'UTC' })).toThrow();
    }
  });
});
