// Names only, no OpenTelemetry types: this file is part of the public API, which must type-check
// in apps that do not have `@opentelemetry/api`.

/** The name of Sluice's tracer and meter (their instrumentation scope). */
export const TELEMETRY_SCOPE = 'nest-sluice';

/** The names of the metrics Sluice records, as exported. */
export const TELEMETRY_METRICS = {
  started: 'sluice.run.started',
  completed: 'sluice.run.completed',
  failed: 'sluice.run.failed',
  retried: 'sluice.run.retried',
  runDuration: 'sluice.run.duration',
  stepDuration: 'sluice.step.duration',
  queueWait: 'sluice.run.queue_wait',
  active: 'sluice.run.active',
} as const;

/** Attribute keys Sluice puts on its spans and metrics. */
export const TELEMETRY_ATTRIBUTES = {
  workflow: 'sluice.workflow',
  namespace: 'sluice.namespace',
  runId: 'sluice.run.id',
  attempt: 'sluice.run.attempt',
  group: 'sluice.run.group',
  outcome: 'sluice.run.outcome',
  replayedSteps: 'sluice.run.replayed_steps',
  stepName: 'sluice.step.name',
  stepKey: 'sluice.step.key',
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
