import { Injectable } from '@nestjs/common';
import { InvalidInputError, InvalidOptionError, RunNotFoundError, RunStateError } from '../errors';
import { FleetWorkflowLookup } from '../discovery/fleet-workflows.lookup';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { listRuns } from '../redis/commands/list-runs.command';
import { removeRun } from '../redis/commands/remove.command';
import { retryBatch, retryRun } from '../redis/commands/retry.command';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisKeys } from '../redis/redis.keys';
import { checkInteger } from '../util/duration';
import { checkId, checkName } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';
import type { WorkflowClass } from '../workflow/workflow.types';
import type { WorkflowContract } from '../workflow/workflow.contract';
import { RUN_FIELDS, RunInfo, toRunInfo, type WaitState } from './run-info';

/** States a finished run can be in: each has its workflow's finish index. */
export type FinishedState = 'completed' | 'failed' | 'cancelled';
/** States `listRuns` pages through. */
export type ListableState = FinishedState | 'delayed' | 'waiting' | 'active' | WaitState;

const FINISHED: readonly string[] = ['completed', 'failed', 'cancelled'];
const WAITS: readonly string[] = ['sleeping', 'waiting-signal', 'waiting-event', 'waiting-child'];
const LISTABLE: readonly string[] = [...FINISHED, 'delayed', 'waiting', 'active', ...WAITS];
const RETRYABLE: readonly string[] = ['failed', 'cancelled'];

/** Options of `QueueAdmin.listRuns`. */
export interface ListRunsOptions {
  /** The workflow whose runs to list: its class, its contract (`defineWorkflow`) or its name. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any contract, whatever its input and output types; public API (API report)
  workflow: WorkflowClass | WorkflowContract<any, any> | string;
  /** The state to list: each state is its own index (a finished state's is in finish order, `delayed`'s in due order). */
  state: ListableState;
  /**
   * Only the runs of this group. For 'waiting' and 'active' it selects the group's own lane or
   * active set; for the finished states and 'delayed' the runs are filtered in Redis as the
   * index is read, and a call examines at most `limit` + 2,000 entries: a page may then come back
   * short, or empty, with a cursor to go on from.
   */
  group?: string;
  /**
   * Only the runs enqueued with this dedupe key (`EnqueueOptions.dedupe.key`), filtered in Redis
   * from each run's record as the index is read: as with `group` on a zset, a call examines at
   * most `limit` + 2,000 entries and a page may come back short, with a cursor to go on from.
   */
  dedupeKey?: string;
  /** From the previous page's `cursor`; omit for the first page. */
  cursor?: string;
  /** Runs per page, 1..1000 (default 100). */
  limit?: number;
  /** 'asc' (default): oldest first — finish, due or claim order; 'desc': newest first. Ignored for 'active'. */
  order?: 'asc' | 'desc';
}

/** A page of `listRuns`. */
export interface RunPage {
  /** Runs of the state asked for: a batch member waiting in its batch ('batched') is in no list (see `QueueClient.batchMembers`). */
  runs: Array<RunInfo & { state: ListableState }>;
  /** Pass as `cursor` for the next page; `null` after the last one. */
  cursor: string | null;
}

/** Options of `QueueAdmin.retryAll`. */
export interface RetryAllOptions {
  /** The workflow whose runs to retry: its class, its contract (`defineWorkflow`) or its name. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any contract, whatever its input and output types; public API (API report)
  workflow: WorkflowClass | WorkflowContract<any, any> | string;
  /** Retry the runs that failed for good, or those that were cancelled. */
  state: 'failed' | 'cancelled';
  /** Retry at most this many runs (default: every run in that state when the call began). */
  limit?: number;
}

/** What `retry` did. */
export interface RetryResult {
  /** The id of the run retried (it keeps its id). */
  id: string;
  /** The state the run was retried from; it is 'waiting' now. */
  previousState: 'failed' | 'cancelled';
}

/** Runs one `retry.lua` batch at most: one short script call, however many runs are failed. */
export const RETRY_BATCH = 500;
const MAX_RETRY_ALL = 1_000_000_000;

/** Cursor shapes per state (see lua/list-runs.lua): a score, '<due> <id>', an offset, an SSCAN cursor. */
const SCORE = /^\d{1,20}$/;

/**
 * The operator's side of runs: listing them by state from their indexes, re-driving failed or
 * cancelled ones, deleting finished ones. One Lua script call per page, per run retried or
 * removed, and per batch of `retryAll` (lua/list-runs.lua, retry.lua, remove.lua).
 */
@Injectable()
export class RunAdmin {
  constructor(
    private readonly scripts: LuaScriptsProvider,
    private readonly keys: RedisKeys,
    private readonly registry: WorkflowRegistry,
    private readonly fleet: FleetWorkflowLookup,
  ) {}

  async listRuns(opts: ListRunsOptions): Promise<RunPage> {
    if (opts === null || typeof opts !== 'object')
      throw new InvalidInputError('opts', 'must be an object { workflow, state, group?, dedupeKey?, cursor?, limit?, order? }');
    checkOptionKeys(opts, ['workflow', 'state', 'group', 'dedupeKey', 'cursor', 'limit', 'order'], 'listRuns opts');
    const workflow = this.resolve(opts.workflow);
    const state = oneOf(opts.state, LISTABLE, 'opts.state') as ListableState;
    const group = opts.group === undefined ? '' : checkName(opts.group, 'opts.group');
    const dedupeKey = opts.dedupeKey === undefined ? '' : checkId(opts.dedupeKey, 'opts.dedupeKey');
    const limit = opts.limit === undefined ? 100 : checkInteger(opts.limit, 'opts.limit', 1, 1_000);
    const order = opts.order === undefined ? 'asc' : (oneOf(opts.order, ['asc', 'desc'], 'opts.order') as 'asc' | 'desc');
    const cursor = opts.cursor === undefined ? '' : checkCursor(opts.cursor, state);
    if (!workflow.known) await this.fleet.confirm(workflow.name, 'listRuns');

    const page = await listRuns(this.scripts.get(), this.keys, {
      workflow: workflow.name,
      state,
      group,
      dedupeKey,
      cursor,
      limit,
      order,
      fields: RUN_FIELDS,
    });
    if (!page) {
      throw new InvalidOptionError(
        'opts.state',
        `completed runs of workflow "${workflow.name}" are not indexed: set @Workflow('${workflow.name}', { indexCompleted: true }) (or keep.completed) to list them`,
      );
    }
    const runs = page.rows
      .map(({ id, values }) => toRunInfo(id, values))
      .filter((run): run is RunInfo & { state: ListableState } => run !== null);
    return { runs, cursor: page.next };
  }

  async retry(runId: string): Promise<RetryResult> {
    checkId(runId, 'runId');
    const { outcome, state } = await retryRun(this.scripts.get(), this.keys, runId);
    if (outcome === 'missing') throw new RunNotFoundError(runId);
    if (outcome === 'state') throw new RunStateError(runId, state, RETRYABLE, 'retry');
    return { id: runId, previousState: state as 'failed' | 'cancelled' };
  }

  async retryAll(opts: RetryAllOptions): Promise<number> {
    if (opts === null || typeof opts !== 'object') throw new InvalidInputError('opts', 'must be an object { workflow, state, limit? }');
    checkOptionKeys(opts, ['workflow', 'state', 'limit'], 'retryAll opts');
    const workflow = this.resolve(opts.workflow);
    const state = oneOf(opts.state, RETRYABLE, 'opts.state') as 'failed' | 'cancelled';
    const limit = opts.limit === undefined ? MAX_RETRY_ALL : checkInteger(opts.limit, 'opts.limit', 1, MAX_RETRY_ALL);
    if (!workflow.known) await this.fleet.confirm(workflow.name, 'retryAll');
    let retried = 0;
    let bound = '';
    for (;;) {
      const batch = await retryBatch(this.scripts.get(), this.keys, {
        workflow: workflow.name,
        state,
        max: Math.min(RETRY_BATCH, limit - retried),
        bound,
      });
      retried += batch.retried;
      bound = batch.bound;
      if (!batch.more || retried >= limit || bound === '') return retried;
    }
  }

  async remove(runId: string): Promise<boolean> {
    checkId(runId, 'runId');
    const { outcome, state } = await removeRun(this.scripts.get(), this.keys, runId);
    if (outcome === 'missing') return false;
    if (outcome === 'state') throw new RunStateError(runId, state, FINISHED, 'remove');
    return true;
  }

  private resolve(workflow: ListRunsOptions['workflow']) {
    if (workflow === undefined || workflow === null)
      throw new InvalidInputError('opts.workflow', 'is required (a @Workflow class, a contract or a workflow name)');
    return this.registry.resolve(workflow);
  }
}

function oneOf(value: unknown, allowed: readonly string[], field: string): string {
  if (typeof value !== 'string' || !allowed.includes(value)) {
    throw new InvalidOptionError(
      field,
      `must be one of ${allowed.map((v) => `'${v}'`).join(', ')}, got ${JSON.stringify(value) ?? String(value)}`,
    );
  }
  return value;
}

/** A cursor of the shape `listRuns` hands out for that state (it is sent to Redis as is). */
function checkCursor(cursor: unknown, state: ListableState): string {
  const bad = (shape: string) =>
    new InvalidOptionError(
      'opts.cursor',
      `must be a cursor from a previous page of state '${state}' (${shape}), got ${JSON.stringify(cursor) ?? String(cursor)}`,
    );
  if (typeof cursor !== 'string') throw bad('a string');
  if (state === 'delayed' || WAITS.includes(state)) {
    const space = cursor.indexOf(' ');
    if (space < 0 || !SCORE.test(cursor.slice(0, space))) throw bad("'<due> <id>'");
    try {
      checkId(cursor.slice(space + 1), 'opts.cursor');
    } catch {
      throw bad("'<due> <id>'");
    }
    return cursor;
  }
  if (!SCORE.test(cursor)) throw bad('digits');
  return cursor;
}
