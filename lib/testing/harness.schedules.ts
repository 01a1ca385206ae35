import { InvalidOptionError, SluiceError } from '../errors';
import type { DeclaredSchedule } from '../interfaces/schedule.options';
import { decodePayload, encodePayload } from '../redis/payload.codec';
import { occurrencesAfter } from '../workflow/cron.plan';
import { checkScheduleTiming } from '../workflow/schedule.timing';
import type { FakeClock } from './fake.clock';
import type { HarnessScheduleFires } from './harness.types';

type Declared = DeclaredSchedule & { id: string };

/** The next occurrence of a schedule, as a worker would fire it. */
export interface ScheduleFire {
  /** The run id the worker gives the fire: `<schedule id>@<occurrence ms>`. */
  runId: string;
  at: number;
  /** The schedule's input, encoded as the worker stores it. */
  input: string;
}

/**
 * A workflow's declared schedules on the harness's fake clock, planned as the worker plans them
 * (cron-parser, the schedule's time zone or UTC, `H` seeded by its id).
 */
export class HarnessSchedules {
  private readonly byId: Map<string, Declared>;

  constructor(
    private readonly workflow: string,
    declared: readonly DeclaredSchedule[] | undefined,
    private readonly clock: FakeClock,
    private readonly maxPayloadBytes: number,
  ) {
    this.byId = new Map(((declared ?? []) as Declared[]).map((s) => [s.id, s]));
  }

  list(count: number): HarnessScheduleFires[] {
    return [...this.byId.values()].map((s) => ({
      id: s.id,
      ...(s.cron !== undefined && { cron: s.cron }),
      ...(s.tz !== undefined && { tz: s.tz }),
      ...(s.every !== undefined && { every: s.every }),
      ...(s.offsetMs !== undefined && { offsetMs: s.offsetMs }),
      input: decodePayload(this.encodedInput(s)),
      next: this.nextFireTimes(s.id, count),
    }));
  }

  nextFireTimes(scheduleId: string | undefined, count: number): Date[] {
    const schedule = this.find(scheduleId);
    if (!Number.isInteger(count) || count < 1 || count > 1_000)
      throw new InvalidOptionError('count', `must be an integer 1–1000, got ${count}`);
    return occurrencesAfter(patternOf(schedule), this.clock.now(), count).map((ms) => new Date(ms));
  }

  nextFire(scheduleId: string | undefined): ScheduleFire {
    const schedule = this.find(scheduleId);
    const [at] = occurrencesAfter(patternOf(schedule), this.clock.now(), 1);
    if (at === undefined) throw new SluiceError(`Schedule "${schedule.id}" has no occurrence after ${this.clock.date().toISOString()}`);
    return { runId: `${schedule.id}@${at}`, at, input: this.encodedInput(schedule) };
  }

  private encodedInput(schedule: Declared): string {
    return encodePayload(schedule.input === undefined ? null : schedule.input, `schedules.${schedule.id}.input`, this.maxPayloadBytes);
  }

  private find(scheduleId: string | undefined): Declared {
    const ids = [...this.byId.keys()];
    if (scheduleId === undefined) {
      if (ids.length === 1) return this.byId.get(ids[0])!;
      const why =
        ids.length === 0
          ? `@Workflow('${this.workflow}') declares no schedules`
          : `is required: @Workflow('${this.workflow}') declares ${ids.join(', ')}`;
      throw new InvalidOptionError('scheduleId', why);
    }
    const schedule = this.byId.get(scheduleId);
    // Its cron and time zone were checked when the decorator was evaluated.
    if (!schedule) {
      throw new InvalidOptionError(
        'scheduleId',
        `"${scheduleId}" is not a schedule of @Workflow('${this.workflow}') (it declares ${ids.join(', ') || 'none'})`,
      );
    }
    return schedule;
  }
}

/** The pattern a declared schedule is planned from (checked already at the decorator). */
function patternOf(schedule: Declared) {
  return checkScheduleTiming(schedule, `schedules.${schedule.id}`, schedule.id);
}
