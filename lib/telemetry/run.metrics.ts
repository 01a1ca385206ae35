import type { Attributes, Counter, Histogram, Meter, ObservableGauge, ObservableResult } from '@opentelemetry/api';
import { TELEMETRY_ATTRIBUTES as ATTR, TELEMETRY_METRICS as METRICS, type AttemptOutcome } from './telemetry.names';

/**
 * Bucket bounds, in seconds, for the duration histograms: from a millisecond (a step or a queue
 * wait on an idle worker) to an hour (a long run, or a backlog). The SDK's default bounds are
 * made for milliseconds and would put every run in their first buckets.
 */
const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

/**
 * The instruments of one worker process. Counters and histograms carry `sluice.workflow` (never
 * the run id or group: one series per run or tenant would swamp a metrics backend).
 */
export class RunMetrics {
  private readonly started: Counter;
  private readonly completed: Counter;
  private readonly failed: Counter;
  private readonly retried: Counter;
  private readonly runDuration: Histogram;
  private readonly stepDuration: Histogram;
  private readonly queueWait: Histogram;
  private readonly activeGauge: ObservableGauge;
  /** Attempts executing in this process, per workflow; a workflow stays at 0 rather than vanish. */
  private readonly active = new Map<string, number>();
  private readonly observeActive = (result: ObservableResult) => {
    for (const [workflow, count] of this.active) result.observe(count, { [ATTR.workflow]: workflow });
  };

  constructor(meter: Meter, workflows: readonly string[]) {
    const runs = { unit: '{run}' };
    const seconds = { unit: 's', advice: { explicitBucketBoundaries: DURATION_BUCKETS } };
    this.started = meter.createCounter(METRICS.started, {
      ...runs,
      description: 'Run attempts this process started (each claim of a run)',
    });
    this.completed = meter.createCounter(METRICS.completed, { ...runs, description: 'Runs this process completed (committed)' });
    this.failed = meter.createCounter(METRICS.failed, {
      ...runs,
      description: 'Runs that failed for good in this process (no attempt follows)',
    });
    this.retried = meter.createCounter(METRICS.retried, {
      ...runs,
      description: 'Attempts that failed in this process and will be retried',
    });
    this.runDuration = meter.createHistogram(METRICS.runDuration, {
      ...seconds,
      description: 'Duration of a run attempt, from its claim to its committed outcome',
    });
    this.stepDuration = meter.createHistogram(METRICS.stepDuration, {
      ...seconds,
      description: 'Duration of an executed step, its durable write included (replayed steps are not measured)',
    });
    this.queueWait = meter.createHistogram(METRICS.queueWait, {
      ...seconds,
      description: 'Time from a run becoming due to its claim by a worker',
    });
    this.activeGauge = meter.createObservableGauge(METRICS.active, { ...runs, description: 'Run attempts executing in this process' });
    for (const workflow of workflows) this.active.set(workflow, 0);
    this.activeGauge.addCallback(this.observeActive);
  }

  /** An attempt starts: counted, its queue wait recorded (when known), and active until {@link ended}. */
  attemptStarted(workflow: string, queueWaitMs: number | undefined): void {
    const attributes = { [ATTR.workflow]: workflow };
    this.started.add(1, attributes);
    if (queueWaitMs !== undefined) this.queueWait.record(queueWaitMs / 1000, attributes);
    this.active.set(workflow, (this.active.get(workflow) ?? 0) + 1);
  }

  /** An attempt's outcome is known (committed, or known lost). */
  attemptOutcome(workflow: string, outcome: AttemptOutcome, durationMs: number, errorType: string | undefined): void {
    const attributes: Attributes = { [ATTR.workflow]: workflow };
    if (outcome === 'completed') this.completed.add(1, attributes);
    else if (outcome === 'failed') this.failed.add(1, attributes);
    else if (outcome === 'retry') this.retried.add(1, attributes);
    attributes[ATTR.outcome] = outcome;
    if (errorType !== undefined) attributes[ATTR.errorType] = errorType;
    this.runDuration.record(durationMs / 1000, attributes);
  }

  /** An attempt no longer executes here. */
  attemptEnded(workflow: string): void {
    this.active.set(workflow, Math.max(0, (this.active.get(workflow) ?? 1) - 1));
  }

  stepExecuted(workflow: string, step: string, durationMs: number, errorType: string | undefined): void {
    const attributes: Attributes = { [ATTR.workflow]: workflow, [ATTR.stepName]: step };
    if (errorType !== undefined) attributes[ATTR.errorType] = errorType;
    this.stepDuration.record(durationMs / 1000, attributes);
  }

  /** Stops observing the gauge (at shutdown): a closed app must not keep reporting. */
  close(): void {
    this.activeGauge.removeCallback(this.observeActive);
  }
}
