/** What a schedule enqueues and when; shared by `@Workflow({ schedules })` and `QueueClient.schedule`. */
export interface ScheduleDefinition<In = unknown> {
  /**
   * Cron expression, parsed by `cron-parser`: 5 fields (`'0 * * * *'`, minute first) or 6
   * (seconds first, `'*\/10 * * * * *'`), or an alias such as `'@hourly'`, `'@daily'`.
   */
  cron: string;
  /** IANA time zone the expression is read in, e.g. `'Europe/Berlin'`. Default: UTC. */
  tz?: string;
  /** Input of every run it starts (default `null`). */
  input?: In;
  /** Group (tenant) of every run it starts. */
  group?: string;
  /** Priority of every run it starts (default 0). */
  priority?: number;
  /**
   * `false`: an occurrence is skipped (and counted in `skipped`) while the run this schedule
   * started last is still waiting, delayed or active. Default `true`: runs may overlap.
   */
  overlap?: boolean;
  /**
   * Occurrences missed while no worker could fire them (downtime): `'latest'` (default) fires
   * the latest of them once; `'all'` fires each, up to `catchUpLimit`, the latest first kept.
   */
  catchUp?: 'latest' | 'all';
  /** With `catchUp: 'all'`, most missed occurrences fired after downtime (default 100, at most 1,000). */
  catchUpLimit?: number;
}

/** A schedule declared in code: `@Workflow('report', { schedules: [{ cron: '0 * * * *' }] })`. */
export interface DeclaredSchedule<In = unknown> extends ScheduleDefinition<In> {
  /**
   * Unique per namespace. Optional when the workflow declares one schedule (its id is then the
   * workflow name); required with several. Keep it stable: a new id is a new schedule.
   */
  id?: string;
}

/** Options of `QueueClient.schedule(id, workflow, options)`. */
export type ScheduleOptions<In = unknown> = ScheduleDefinition<In>;
