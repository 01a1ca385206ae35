import type { Duration } from '../util/duration';

/** When a cron schedule fires. */
export interface CronTiming {
  /**
   * Cron expression, parsed by `cron-parser`: 5 fields (`'0 * * * *'`, minute first) or 6
   * (seconds first, `'*\/10 * * * * *'`), or an alias such as `'@hourly'`, `'@daily'`.
   */
  cron: string;
  /** IANA time zone the expression is read in, e.g. `'Europe/Berlin'`. Default: UTC. */
  tz?: string;
  /** Not with `cron`: an interval schedule's field ({@link IntervalTiming}). */
  every?: never;
  /** Not with `cron`: an interval schedule's field ({@link IntervalTiming}). */
  offsetMs?: never;
}

/**
 * When an interval schedule fires: every `every`, at `offsetMs + k × every` since the Unix epoch
 * (UTC), so `{ every: '1h', offsetMs: 15 * 60_000 }` fires at a quarter past each hour. Aligned to
 * the epoch, not to when the schedule was written: every process plans the same instants.
 */
export interface IntervalTiming {
  /** The interval: ms, or a string such as `'30s'`, `'5m'`, `'1d'`; at least 1 s. */
  every: Duration;
  /** The phase, in ms: 0 (default) to less than `every`. */
  offsetMs?: number;
  /** Not with `every`: a cron schedule's field ({@link CronTiming}). */
  cron?: never;
  /** Not with `every`: a cron schedule's field ({@link CronTiming}). */
  tz?: never;
}

/** What a schedule enqueues, and its catch-up and overlap rules (the same for cron and `every`). */
export interface ScheduleRunOptions<In = unknown> {
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

/**
 * What a schedule enqueues and when — a `cron` expression or an interval (`every`), exactly one;
 * shared by `@Workflow({ schedules })` and `QueueClient.schedule`.
 */
export type ScheduleDefinition<In = unknown> = ScheduleRunOptions<In> & (CronTiming | IntervalTiming);

/** A schedule declared in code: `@Workflow('report', { schedules: [{ cron: '0 * * * *' }] })` or `[{ every: '5m' }]`. */
export type DeclaredSchedule<In = unknown> = ScheduleDefinition<In> & {
  /**
   * Unique per namespace. Optional when the workflow declares one schedule (its id is then the
   * workflow name); required with several. Keep it stable: a new id is a new schedule.
   */
  id?: string;
};

/** Options of `QueueClient.schedule(id, workflow, options)`. */
export type ScheduleOptions<In = unknown> = ScheduleDefinition<In>;
