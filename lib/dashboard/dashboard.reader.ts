import { Inject, Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { QueueClient } from '../client/queue.client';
import type { RunInfo } from '../client/run-info';
import type { RunTimeline } from '../client/run.timeline';
import type { ScheduleInfo } from '../schedule/schedule-info';
import type { GroupStats, WorkflowStats } from '../interfaces/queue.stats';
import { InvalidOptionError } from '../errors';
import { CompletedWatch } from './completed.watch';
import { DASHBOARD_OPTIONS, type ResolvedDashboardOptions } from './dashboard.options';
import { RunLister, type RunsQuery, type RunsView } from './dashboard.runs';
import { EventRuns } from './dashboard.event-runs';
import { redactRun } from './stack.redaction';
import { runForDisplay } from './payload.display';
import { ThroughputSampler, type ThroughputSeries } from './throughput.sampler';

/** How long after the last overview read the background sampler keeps sampling. */
const SAMPLE_AFTER_VIEW_MS = 15 * 60_000;

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
  groups: Array<GroupStats & { name: string }>;
  offset: number;
  next: number | null;
  /** Groups in the sample read (at most 1 000, see `QueueClient.stats`). */
  total: number;
  /** Groups with work beyond that sample. */
  omitted: number;
  /** The whole workflow is paused (so is every group, whatever its own flag). */
  workflowPaused: boolean;
}

/**
 * What the dashboard's pages read, through `QueueClient`'s public API only: the overview (one
 * `stats()` call, which is also a throughput sample), a workflow's groups, a page of runs, a run
 * with its timeline, the schedules. Each read's cost is that of the client call it makes; the
 * overview and runs reads also renew the completed-runs watch (CompletedWatch: a write a minute).
 */
@Injectable()
export class DashboardReader implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('SluiceDashboard');
  private readonly sampler: ThroughputSampler;
  private readonly lister: RunLister;
  private readonly eventRuns: EventRuns;
  private timer?: NodeJS.Timeout;
  private sampling = false;
  /** When an overview was last read: the sampler works only while someone looks (and a while after). */
  private lastViewAt = -Infinity;

  constructor(
    private readonly client: QueueClient,
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly watch: CompletedWatch,
  ) {
    this.lister = new RunLister(client);
    this.eventRuns = new EventRuns(client);
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
    const [stats] = await Promise.all([this.client.stats(), this.watch.touch()]);
    const at = Date.now();
    this.lastViewAt = at;
    this.sampler.record(stats, at);
    const workflows = Object.entries(stats.workflows)
      .map(([name, { groups: _groups, groupsOmitted: _omitted, ...counts }]) => ({ name, ...counts }))
      .sort((a, b) => a.name.localeCompare(b.name));
    return { at, readOnly: this.options.readOnly, namespace: stats.namespace, workflows, throughput: this.sampler.series() };
  }

  /**
   * Busiest first (due plus active runs) among the groups `stats` lists, those `filter` keeps;
   * cost bounded by that sample, never a scan of every group.
   */
  async groups(workflow: string, offset: number, filter: GroupFilter = {}): Promise<GroupsView> {
    const stats = await this.client.stats({ workflow, groups: true });
    const found = stats.workflows[workflow];
    const all = Object.entries(found?.groups ?? {})
      .map(([name, group]) => ({ name, ...group }))
      .filter((group) => keepsGroup(filter, group))
      .sort((a, b) => b.waiting + b.active - (a.waiting + a.active) || a.name.localeCompare(b.name));
    const page = all.slice(offset, offset + GROUP_PAGE);
    return {
      groups: page,
      offset,
      next: offset + GROUP_PAGE < all.length ? offset + GROUP_PAGE : null,
      total: all.length,
      omitted: found?.groupsOmitted ?? 0,
      workflowPaused: found?.paused ?? false,
    };
  }

  /**
   * A page of runs (one state or all), the run of an exact id, the runs of an event (by id, or
   * the newest of a name: see EventRuns), or the members of a batch run; while read, completed
   * runs are indexed (CompletedWatch).
   */
  async runs(query: RunsQuery & { id?: string; event?: string; eventId?: string; batch?: string }): Promise<RunsView> {
    await this.watch.touch();
    if (query.id !== undefined) return this.lister.byId(query.id);
    if (query.eventId !== undefined || query.event !== undefined) return this.eventRuns.list(query, query.limit);
    if (query.batch !== undefined) return this.lister.byBatch(query.batch, query.cursor, query.limit);
    return this.lister.list(query);
  }

  /** A run with its timeline; a batch run (docs/batches.md) with its member ids too. */
  async run(id: string): Promise<{ run: RunInfo; timeline: RunTimeline; members?: string[] } | null> {
    const [run, timeline] = await Promise.all([this.client.get(id), this.client.timeline(id)]);
    if (!run) return null;
    const members = run.batchOf !== undefined ? ((await this.client.batchMembers(id)) ?? []) : undefined;
    const found = { run: runForDisplay(run), timeline: timeline ?? { attempts: [] }, ...(members && { members }) };
    return this.options.redactStacks ? redactRun(found) : found;
  }

  schedules(cursor?: string, workflow?: string): Promise<{ schedules: ScheduleInfo[]; cursor: string | null }> {
    return this.client.listSchedules({ cursor, limit: 100, workflow });
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

/** A query number: absent → the default; else an integer in range, or a 400. */
/** What the groups view can be narrowed to: groups its rate limit holds back, or paused ones. */
export const GROUP_FILTERS = ['rate-held', 'paused'] as const;
export type GroupFilterKind = (typeof GROUP_FILTERS)[number];

export function isGroupFilter(value: string): value is GroupFilterKind {
  return (GROUP_FILTERS as readonly string[]).includes(value);
}

/** The groups view's filter: a kind (`only`) and a part of the name (`q`, case-insensitive). */
export interface GroupFilter {
  only?: GroupFilterKind;
  q?: string;
}

function keepsGroup({ only, q }: GroupFilter, group: GroupStats & { name: string }): boolean {
  if (only === 'rate-held' && !group.rateHeldUntil) return false;
  if (only === 'paused' && !group.paused) return false;
  return q === undefined || group.name.toLowerCase().includes(q.toLowerCase());
}

export function queryInt(value: unknown, name: string, min: number, max: number, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  const number = Number(value);
  if (!Number.isInteger(number) || number < min || number > max)
    throw new InvalidOptionError(name, `must be an integer from ${min} to ${max}`);
  return number;
}
