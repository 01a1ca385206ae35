// Names only, no OpenTelemetry types: this file is part of the public API, which must type-check
// in apps that do not have `@opentelemetry/api`.

/** The name of Sluice's tracer and meter (their instrumentation scope). */
export const TELEMETRY_SCOPE = 'nest-sluice';

/** The names of the metrics Sluice records, as exported. */
export const TELEMETRY_METRICS = {
  /** Counter (`{run}`): run attempts this process started, one per claim. Attribute: `sluice.workflow`. */
  started: 'sluice.run.started',
  /** Counter (`{run}`): runs this process completed (committed). Attribute: `sluice.workflow`. */
  completed: 'sluice.run.completed',
  /** Counter (`{run}`): runs that failed for good in this process (no attempt follows). Attribute: `sluice.workflow`. */
  failed: 'sluice.run.failed',
  /** Counter (`{run}`): attempts that failed in this process and will be retried. Attribute: `sluice.workflow`. */
  retried: 'sluice.run.retried',
  /**
   * Histogram, in seconds: an attempt's duration, from its claim to its committed outcome.
   * Attributes: `sluice.workflow`, `sluice.run.outcome`, and `error.type` when it threw.
   */
  runDuration: 'sluice.run.duration',
  /**
   * Histogram, in seconds: an executed step's duration, its durable write included (replayed
   * steps are not measured). Attributes: `sluice.workflow`, `sluice.step.name`, and `error.type` when it threw.
   */
  stepDuration: 'sluice.step.duration',
  /** Histogram, in seconds: from a run becoming due to its claim by a worker. Attribute: `sluice.workflow`. */
  queueWait: 'sluice.run.queue_wait',
  /** Gauge (`{run}`): run attempts executing in this process now, per `sluice.workflow`. */
  active: 'sluice.run.active',
} as const;

/** Attribute keys Sluice puts on its spans and metrics. */
export const TELEMETRY_ATTRIBUTES = {
  /** The workflow's name: on attempt spans and on every metric. */
  workflow: 'sluice.workflow',
  /** The namespace (`QueueModuleOptions.namespace`): on attempt spans. */
  namespace: 'sluice.namespace',
  /** The run's id: on attempt spans. */
  runId: 'sluice.run.id',
  /** The attempt's number, 1-based: on attempt spans. */
  attempt: 'sluice.run.attempt',
  /** The run's group: on attempt spans of grouped runs. */
  group: 'sluice.run.group',
  /** How the attempt ended ({@link AttemptOutcome}): on attempt spans and `sluice.run.duration`. */
  outcome: 'sluice.run.outcome',
  /** Steps replayed from the memo in the attempt: on attempt spans that replayed any. */
  replayedSteps: 'sluice.run.replayed_steps',
  /** The step's name: on step spans, step-replayed events and `sluice.step.duration`. */
  stepName: 'sluice.step.name',
  /** The step's memo key, `name#occurrence`: on step spans and step-replayed events. */
  stepKey: 'sluice.step.key',
  /** The class name of the error thrown (OpenTelemetry's `error.type`): on failed spans and duration metrics. */
  errorType: 'error.type',
} as const;

/** Span event on an attempt span for each step replayed from the memo (a replay gets no span). */
export const STEP_REPLAYED_EVENT = 'sluice.step.replayed';

/**
 * How an attempt ended, as `sluice.run.outcome`: `completed`; `retry` (it failed, another attempt
 * follows); `failed` (for good); `lost` (its lease was gone: nothing it did was kept, another
 * worker carries the run on); `released` (handed back to the queue, no failure counted: Redis was
 * away when a step saved); `suspended` (a durable wait); `continued` (`ctx.continueAsNew`: the run
 * starts afresh); `unknown` (the commit itself could not reach Redis: the lease lapses and
 * the stalled scan recovers the run).
 */
export type AttemptOutcome = 'completed' | 'retry' | 'failed' | 'lost' | 'released' | 'suspended' | 'continued' | 'unknown';
