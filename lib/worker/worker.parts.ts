import type { LocalWaits } from '../interfaces/local.waits';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import type { PlanRequest } from '../redis/commands/reserve.command';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisConnections } from '../redis/redis.connections';
import type { RedisKeys } from '../redis/redis.keys';
import type { ActiveRun, ActiveRuns } from './active-runs';
import type { RunCommits } from './run.commits';
import type { RunExecutor } from './run.executor';
import type { RunEvents } from './run.events';

/** What a worker loop is built from (see WorkerOrchestrator). */
export interface WorkerParts {
  connections: RedisConnections;
  scripts: LuaScripts;
  keys: RedisKeys;
  options: ResolvedQueueOptions;
  /** The workflows this process runs. */
  workflows: string[];
  /** The worker's id in the parked sets; its handoffs come on the channel RedisKeys.handoff names. */
  workerId: string;
  active: ActiveRuns;
  makeExecutor: (commits: RunCommits) => RunExecutor;
  /** Renews a run's lease now (a handoff's lease started running at its enqueue). */
  refreshLease: (run: ActiveRun) => void;
  /** Answers the schedule plan requests of a reserve reply, in the background (see SchedulePlanner). */
  answerPlanRequests: (redisNowMs: number, requests: PlanRequest[]) => void;
  /** Where the runs this process's stalled scans recovered are reported ('stalled'). */
  events: RunEvents;
  /** Carries on, in the background, a cancel cascade a stalled scan found cut short (see CascadeResumer). */
  resumeCascade: (runId: string) => void;
  /**
   * What a claiming call adds to its flags, asked per call: CLAIM_EXTRAS (each claim's trace and
   * queue wait) while the worker's telemetry records, else 0.
   */
  claimExtras: () => number;
  /** This process's run() waits: the worker's complete calls tell them of their runs (see LocalWaits). */
  localWaits?: LocalWaits;
}
