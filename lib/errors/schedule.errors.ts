import { InvalidInputError } from './input.errors';
import { SluiceError } from './sluice.error';

/**
 * A cron expression `cron-parser` rejects, one that never fires, or an unknown time zone. `field`
 * names where it came from (`opts.cron`, `@Workflow('report') schedules[0].tz`…), and the
 * message quotes the offending value.
 */
export class InvalidScheduleError extends InvalidInputError {}

/** `schedule(id, …)` with an id that belongs to a schedule of another workflow. Nothing was written. */
export class ScheduleConflictError extends SluiceError {
  constructor(
    /** The schedule id given. */
    readonly scheduleId: string,
    /** The workflow the existing schedule of that id belongs to. */
    readonly existingWorkflow: string,
    /** The workflow this call named. */
    readonly workflow: string,
  ) {
    super(
      `schedule "${scheduleId}" already exists for workflow "${existingWorkflow}", not "${workflow}": ` +
        'a schedule id is unique per namespace; unschedule it first or pick another id. Nothing was written',
    );
  }
}

/** `pauseSchedule` / `resumeSchedule` of an id no schedule has. */
export class ScheduleNotFoundError extends SluiceError {
  constructor(
    /** The schedule id given. */
    readonly scheduleId: string,
  ) {
    super(`no schedule "${scheduleId}" in this namespace`);
  }
}
