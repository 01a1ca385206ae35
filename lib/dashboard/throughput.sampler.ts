import type { QueueStats } from '../interfaces/queue.stats';

/** Samples kept: with the default 5 s, the last five minutes. */
export const THROUGHPUT_SAMPLES = 61;

/** Throughput over the sampled minutes, as the overview draws it. */
export interface ThroughputSeries {
  /** The step between samples the series was built on (the sampling interval). */
  stepMs: number;
  /** End time (ms) of each interval. */
  at: number[];
  /** Runs per second that completed / failed for good over each interval, per workflow. */
  workflows: Record<string, { completed: number[]; failed: number[] }>;
}

interface Sample {
  at: number;
  totals: Record<string, { completed: number; failed: number }>;
}

/**
 * Throughput from the workflows' running totals (`stats()`): no counter on the hot path. Every
 * overview read is a sample (free: the page asked for the stats anyway); between them, a timer
 * takes one every `sampleMs`, for a while after the last view only. Samples closer than half the
 * interval are merged, so many open pages do not make the series finer or costlier.
 */
export class ThroughputSampler {
  private readonly samples: Sample[] = [];

  constructor(private readonly intervalMs: number) {}

  /** Whether the latest sample is older than the interval (the timer then takes one). */
  due(now = Date.now()): boolean {
    const last = this.samples[this.samples.length - 1];
    return !last || now - last.at >= this.intervalMs;
  }

  record(stats: QueueStats, at = Date.now()): void {
    const last = this.samples[this.samples.length - 1];
    if (last && at - last.at < this.intervalMs / 2) return;
    const totals: Sample['totals'] = {};
    for (const [name, workflow] of Object.entries(stats.workflows))
      totals[name] = { completed: workflow.completed, failed: workflow.failed };
    this.samples.push({ at, totals });
    if (this.samples.length > THROUGHPUT_SAMPLES) this.samples.shift();
  }

  series(): ThroughputSeries {
    const at: number[] = [];
    const workflows: ThroughputSeries['workflows'] = {};
    for (let i = 1; i < this.samples.length; i++) {
      const [before, after] = [this.samples[i - 1], this.samples[i]];
      const seconds = (after.at - before.at) / 1000;
      at.push(after.at);
      for (const [name, totals] of Object.entries(after.totals)) {
        const series = (workflows[name] ??= {
          completed: Array<number>(at.length - 1).fill(0),
          failed: Array<number>(at.length - 1).fill(0),
        });
        const previous = before.totals[name] ?? { completed: totals.completed, failed: totals.failed };
        // A running total that went down was reset (namespace dropped): that interval counts 0.
        series.completed.push(round(Math.max(0, totals.completed - previous.completed) / seconds));
        series.failed.push(round(Math.max(0, totals.failed - previous.failed) / seconds));
      }
      for (const series of Object.values(workflows)) {
        while (series.completed.length < at.length) series.completed.push(0);
        while (series.failed.length < at.length) series.failed.push(0);
      }
    }
    return { stepMs: this.intervalMs, at, workflows };
  }
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
