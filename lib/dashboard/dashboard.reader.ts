import { Inject, Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { QueueClient } from '../client/queue.client';
import type { ListableState } from '../client/run.admin';
import type { RunInfo } from '../client/run-info';
import type { RunTimeline } from '../client/run.timeline';
import type { ScheduleInfo } from '../schedule/schedule-info';
import type { WorkflowStats } from '../client/stats';
import { InvalidOptionError } from '../errors';
import { DASHBOARD_OPTIONS, type ResolvedDashboardOptions } from './dashboard.options';
import { ThroughputSampler, type ThroughputSeries } from './throughput.sampler';

/** How long after the last overview read the background sampler keeps sampling. */
const SAMPLE_AFTER_VIEW_MS = 15 * 60_000;

/** Characters of a run's input shown in a list (the run page shows all of it). */
const INPUT_PREVIEW = 300;
/** Groups per page of the groups view. */
const GROUP_PAGE = 50;

export interface OverviewView {
  at: number;
  readOnly: boolean;
  namespace: { active: number; limit: number | null };
  workflows: Array<{ name: string } & Omit<WorkflowStats, 'groups' | 'groupsOmitted'>>;
  throughput: ThroughputSeries;
}

export interface GroupsView {
  groups: Array<{ name: string; waiting: number; active: number; limit: number | null; paused: boolean }>;
  offset: number;
  next: number | null;
  /** Groups in the sample read (at most 1 000, see `QueueClient.stats`). */
  total: number;
  /** Groups with work beyond that sample. */
  omitted: number;
  /** The whole workflow is paused (so is every group, whatever its own flag). */
  workflowPaused: boolean;
}

export interface RunSummary extends Omit<RunInfo, 'input' | 'result' | 'progress' | 'error' | 'waitingFor'> {
  input: string;
  error?: { name: string; message: string };
}

/**
 * What the dashboard's pages read, through `QueueClient`'s public API only: the overview (one
 * `stats()` call, which is also a throughput sample), a workflow's groups, a page of runs, a run
 * with its timeline, the schedules. Each read's cost is that of the client call it makes.
 */
@Injectable()
export class DashboardReader implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('SluiceDashboard');
  private readonly sampler: ThroughputSampler;
  private timer?: NodeJS.Timeout;
  private sampling = false;
  /** When an overview was last read: the sampler works only while someone looks (and a while after). */
  private lastViewAt = -Infinity;

  constructor(
    private readonly client: QueueClient,
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
  ) {
    this.sampler = new ThroughputSampler(options.sampleMs === false ? options.pollMs : options.sampleMs);
  }

  onModuleInit(): void {
    const { sampleMs } = this.options;
    if (sampleMs === false) return;
    this.timer = setInterval(() => void this.sampleIfDue(), sampleMs);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
  }

  async overview(): Promise<OverviewView> {
    const stats = await this.client.stats();
    const at = Date.now();
    this.lastViewAt = at;
    this.sampler.record(stats, at);
    const workflows = Object.entries(stats.workflows)
      .map(([name, { groups: _groups, groupsOmitted: _omitted, ...counts }]) => ({ name, ...counts }))
      .sort((a, b) => a.name.localeCompare(b.name));
    return { at, readOnly: this.options.readOnly, namespace: stats.namespace, workflows, throughput: this.sampler.series() };
  }

  /** Busiest first (due plus active runs) among the groups `stats` lists; cost bounded by that sample, never a scan of every group. */
  async groups(workflow: string, offset: number): Promise<GroupsView> {
    const stats = await this.client.stats({ workflow, groups: true });
    const found = stats.workflows[workflow];
    const all = Object.entries(found?.groups ?? {})
      .map(([name, group]) => ({ name, ...group }))
      .sort((a, b) => b.waiting + b.active - (a.waiting + a.active) || a.name.localeCompare(b.name));
    const page = all.slice(offset, offset + GROUP_PAGE);
    return { groups: page, offset, next: offset + GROUP_PAGE < all.length ? offset + GROUP_PAGE : null, total: all.length, omitted: found?.groupsOmitted ?? 0, workflowPaused: found?.paused ?? false };
  }

  async runs(query: { workflow: string; state: string; group?: string; cursor?: string; limit?: number }): Promise<{ runs: RunSummary[]; cursor: string | null }> {
    const page = await this.client.listRuns({ workflow: query.workflow, state: query.state as ListableState, group: query.group, cursor: query.cursor, limit: query.limit ?? 50 });
    return { runs: page.runs.map(summarize), cursor: page.cursor };
  }

  async run(id: string): Promise<{ run: RunInfo; timeline: RunTimeline } | null> {
    const [run, timeline] = await Promise.all([this.client.get(id), this.client.timeline(id)]);
    if (!run) return null;
    return { run, timeline: timeline ?? { attempts: [] } };
  }

  schedules(cursor?: string): Promise<{ schedules: ScheduleInfo[]; cursor: string | null }> {
    return this.client.listSchedules({ cursor, limit: 100 });
  }

  private async sampleIfDue(): Promise<void> {
    // A process nobody watches (a worker replica, say) samples nothing.
    if (this.sampling || !this.sampler.due() || Date.now() - this.lastViewAt > SAMPLE_AFTER_VIEW_MS) return;
    this.sampling = true;
    try {
      this.sampler.record(await this.client.stats());
    } catch (error) {
      // Redis away: the chart shows the gap; the pages report the error themselves.
      this.logger.debug(`throughput sample skipped: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      this.sampling = false;
    }
  }
}

function summarize(run: RunInfo): RunSummary {
  const { input, result: _result, progress: _progress, error, waitingFor: _waitingFor, ...rest } = run;
  const text = JSON.stringify(input) ?? 'undefined';
  return { ...rest, input: text.length > INPUT_PREVIEW ? `${text.slice(0, INPUT_PREVIEW)}…` : text, ...(error && { error: { name: error.name, message: error.message } }) };
}

/** A query number: absent → the default; else an integer in range, or a 400. */
export function queryInt(value: unknown, name: string, min: number, max: number, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  const number = Number(value);
  if (!Number.isInteger(number) || number < min || number > max) throw new InvalidOptionError(name, `must be an integer from ${min} to ${max}`);
  return number;
}
