import type { RateLimit } from './rate-limit';

/** Counts of one group of a workflow. */
export interface GroupStats {
  /** Due runs queued in the group. */
  waiting: number;
  /** Runs of the group active now (holding a slot). */
  active: number;
  /** The cap that holds for the group (its override, else the workflow's default); `null` = none. */
  limit: number | null;
  /** Paused on its own (`QueueClient.pause({ workflow, group })`); a paused workflow pauses every group too. */
  paused: boolean;
  /** The rate limit that holds for the group: its override, else the workflow's `groupRateLimit`; `null` = none. */
  rateLimit: RateLimit | null;
  /** Set while the group's rate limit holds its due runs back: when its window frees. */
  rateHeldUntil?: Date;
}

/** Counts and caps of one workflow. */
export interface WorkflowStats {
  /** Due runs queued, in every lane (ungrouped and groups). */
  waiting: number;
  /** Runs not due yet: delayed, or waiting out a retry backoff (not those in a durable wait, counted below). */
  delayed: number;
  /** Runs in `ctx.sleep` / `sleepUntil`. */
  sleeping: number;
  /** Runs in `ctx.waitForSignal`. */
  waitingSignal: number;
  /** Runs in `ctx.waitForEvent`. */
  waitingEvent: number;
  /** Runs waiting for child workflows (`ctx.invoke`, `invokeAll`). */
  waitingChild: number;
  /** Runs of the workflow active now, fleet-wide (holding a slot). */
  active: number;
  /** The workflow cap; `null` = none. */
  limit: number | null;
  /** Default cap of each group; `null` = none. */
  groupLimit: number | null;
  /** Runs completed since the namespace began (a running total; finished records expire). */
  completed: number;
  /** Runs failed for good since the namespace began (a running total). */
  failed: number;
  /** Runs cancelled since the namespace began (a running total). */
  cancelled: number;
  /** Whether the workflow is paused (`QueueClient.pause`): no run of it starts. */
  paused: boolean;
  /** The workflow's rate limit; `null` = none. */
  rateLimit: RateLimit | null;
  /** Default rate limit of each group; `null` = none. */
  groupRateLimit: RateLimit | null;
  /**
   * Per group with due or active runs, when asked for with `{ groups: true }`: at most
   * 1,000 groups, an arbitrary selection (not the busiest) when there are more.
   */
  groups?: Record<string, GroupStats>;
  /** How many groups with due or active runs `groups` leaves out; present only when it leaves some out. */
  groupsOmitted?: number;
}

/** What `QueueClient.stats` returns. */
export interface QueueStats {
  /** The namespace as a whole. */
  namespace: {
    /** Runs of all its workflows active now, fleet-wide. */
    active: number;
    /** The namespace cap; `null` = none. */
    limit: number | null;
  };
  /** Per workflow name: every workflow a worker registered, or the one asked for. */
  workflows: Record<string, WorkflowStats>;
}

/** Most groups `stats({ groups: true })` lists per workflow (GROUP_ROWS in lua/stats.lua). */
export const MAX_GROUP_ROWS = 1000;
