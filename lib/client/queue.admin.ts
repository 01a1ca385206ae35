import { Inject, Injectable, Logger } from '@nestjs/common';
import { FleetWorkflowLookup } from '../discovery/fleet-workflows.lookup';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { InvalidInputError, InvalidOptionError } from '../errors';
import { limitField, type LimitTarget, type Limits } from '../interfaces/limits';
import { checkRateLimit, type RateLimit } from '../interfaces/rate-limit';
import type { LayoutMigrator, MigrateOptions, MigrationResult } from '../migration/layout.migrator';
import { checkOptionKeys } from '../util/option-keys';
import { NamespaceLayout } from '../migration/namespace.layout';
import { createMigrator } from '../migration/migration.runner';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import type { QueueStats } from '../interfaces/queue.stats';
import { readStats } from '../redis/commands/stats.command';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import { checkId } from '../util/names';
import { ListRunsOptions, RetryAllOptions, RetryResult, RunAdmin, RunPage } from './run.admin';
import { CancelOptions, CancelResult, checkPauseTarget, PauseTarget, RunControl } from './run.control';
import { RunLimits } from './run.limits';
import { readTimeline, type RunTimeline } from './run.timeline';
import type { WorkflowRef } from './workflow.ref';

/**
 * The operator's calls: cancel, retry and remove runs, list them and read their timelines, pause
 * workflows, set caps and rate limits, read stats, migrate the namespace's data. Inject it
 * anywhere once `QueueModule` is imported (`QueueClient` offers the same calls).
 */
@Injectable()
export class QueueAdmin {
  private migrator?: LayoutMigrator;

  /** @internal Nest constructs it from Sluice's internal services: inject `QueueAdmin` instead. */
  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly registry: WorkflowRegistry,
    private readonly fleet: FleetWorkflowLookup,
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScriptsProvider,
    private readonly keys: RedisKeys,
    private readonly runs: RunAdmin,
    private readonly control: RunControl,
    private readonly limits: RunLimits,
    private readonly layout: NamespaceLayout,
  ) {}

  /**
   * Cancels a run that has not finished, fleet-wide, in one Redis call. A waiting or delayed run
   * leaves its queue at once. An active run frees its slots at once; the worker running it aborts
   * its `ctx.signal` with `RunCancelledError` as soon as the cancel message reaches it (one pub/sub
   * hop; if that message is lost, within a third of `worker.lockMs`), and refuses the attempt's
   * later step and result writes. Waiters reject with `RunCancelledError`; `get` shows the state
   * `cancelled` and the reason. `retry` brings a cancelled run back. A run waiting for children
   * cancels them too, and theirs in turn, in further calls of at most `CANCEL_BATCH` runs each.
   * @returns `{ cancelled: false, state }` for a run that had finished: nothing is changed (but the
   *   rest of a cascade of its that was cut short is finished)
   * @throws RunNotFoundError if there is no such run; InvalidNameError / InvalidOptionError on bad input
   */
  cancel(runId: string, opts?: CancelOptions): Promise<CancelResult> {
    return this.control.cancel(runId, opts);
  }

  /**
   * Puts a failed or cancelled run back to waiting, in one atomic script: it gets a full set of
   * attempts and resumes at the step that failed (its finished steps are not executed again).
   * A run that failed with a child's `ChildWorkflowFailedError` loses the child failures in its
   * memo, so it waits for those children again: retry the (fixed) child first, then the parent.
   * @throws RunNotFoundError, RunStateError (a run in another state; nothing written)
   */
  retry(runId: string): Promise<RetryResult> {
    return this.runs.retry(runId);
  }

  /**
   * Retries a workflow's failed (or cancelled) runs, oldest first, in batches of at most 500 per
   * Redis call, up to `limit`; runs that fail again meanwhile are not taken twice.
   * @returns how many runs were retried
   */
  retryAll(opts: RetryAllOptions): Promise<number> {
    return this.runs.retryAll(opts);
  }

  /**
   * Deletes a finished run (its record, step memo and index entry); its id can be enqueued again.
   * @returns false if there was no such run
   * @throws RunStateError for a run not finished (cancel it first)
   */
  remove(runId: string): Promise<boolean> {
    return this.runs.remove(runId);
  }

  /**
   * A page of a workflow's runs in one state, read from the index of that state in one Lua call
   * (never a scan of the keyspace): 'completed' / 'failed' / 'cancelled' in finish order (the
   * cursor stays valid while runs keep finishing: no run shows twice, none that existed is
   * skipped), 'delayed' in due order, 'waiting' in claim order (of the ungrouped runs, or of one
   * group's), 'active' unordered. A 'waiting' page is a snapshot: runs claimed meanwhile shift the
   * next one. See {@link ListRunsOptions} for the group filter's bound.
   * @throws InvalidInputError / InvalidOptionError / InvalidNameError before any Redis call
   */
  listRuns(opts: ListRunsOptions): Promise<RunPage> {
    return this.runs.listRuns(opts);
  }

  /**
   * When each step and durable wait of the run ran, attempt by attempt (the latest 50,
   * `MAX_TIMELINE_ATTEMPTS`), on the workers' clocks; `null` if the run does not exist.
   * Two reads. What the dashboard draws as the run's step timeline.
   */
  async timeline(runId: string): Promise<RunTimeline | null> {
    checkId(runId, 'runId');
    return this.connections.command.call('timeline', (redis) => readTimeline(redis, this.keys, runId), { idempotent: true });
  }

  /**
   * Pauses a workflow, or one group of it, fleet-wide: no worker starts a run of it (not even a
   * retry) until {@link resume}; runs in flight finish, and enqueues are still accepted. `stats`
   * shows it. Costs the claim path nothing while no pause or rate limit is set in the namespace.
   * @returns `false` if it was paused already
   * @throws UnknownWorkflowError if no worker of the fleet registered the workflow
   */
  async pause(target: PauseTarget): Promise<boolean> {
    return this.control.setPaused(await this.controlTarget(target, 'pause'), true);
  }

  /** Lets a paused workflow or group start runs again, and wakes its workers. @returns `false` if it was not paused */
  async resume(target: PauseTarget): Promise<boolean> {
    return this.control.setPaused(await this.controlTarget(target, 'resume'), false);
  }

  /**
   * Sets a fleet-wide cap at runtime (see {@link LimitTarget}); `limit: null` removes it. Runs
   * claimed from now on obey it; active runs keep their slots. A cap code declares (the
   * namespace's, the workflow's, every group's default) set here is recorded as set at runtime,
   * with the declaration it overrides (`getLimits` shows it in `setAtRuntime`): worker bootstraps
   * keep it while their code still declares that, and replace it once the code declares something
   * else (the new declaration wins, and the bootstrap logs it). Setting the declared value again
   * hands the cap back to the code. Per-group overrides are only ever set here.
   *
   * Raising or removing every group's default (`group: '*'`) lets the groups the old cap held
   * back start more runs at once, without waiting for one of their runs to finish: the groups are
   * visited in batches of about 500, one Redis call each, and the promise resolves once all of
   * them were (so with 100 000 groups, about 200 short calls, none of which blocks Redis long).
   * If it rejects part-way, the groups not visited yet get their new slots when a run of theirs
   * finishes; setting the same cap again visits them all.
   * @returns the previous cap (`null` if there was none)
   */
  async setLimits(target: LimitTarget & { limit: number | null }): Promise<number | null>;
  /**
   * Sets a fleet-wide rate limit at runtime: `{ workflow }` the workflow's, `{ workflow, group:
   * '*' }` every group's default, `{ workflow, group }` one group's override; `rateLimit: null`
   * removes it. Claims from now on obey it (see {@link RateLimit}). The workflow's and every
   * group's default outlive worker bootstraps as caps do: until the code's
   * `@Workflow({ rateLimit, groupRateLimit })` declares something else than what they overrode.
   *
   * Raising or removing a limit reviews the groups it held back, in batches of about 500 (one
   * Redis call each); if this call rejects part-way, the workflow's workers finish the review,
   * and setting the limit again (even to the same value) goes on with it.
   * @returns the previous rate limit (`null` if there was none)
   */
  async setLimits(target: LimitTarget & { rateLimit: RateLimit | null }): Promise<RateLimit | null>;
  async setLimits(target: LimitTarget & { limit?: number | null; rateLimit?: RateLimit | null }): Promise<number | RateLimit | null> {
    limitField(target); // validates the target before the rest
    checkOptionKeys(target, ['workflow', 'group', 'limit', 'rateLimit'], 'setLimits target');
    if (target.rateLimit === undefined) return this.limits.setCap(target);
    if (target.limit !== undefined) throw new InvalidOptionError('target', 'set either limit or rateLimit in one call, not both');
    if (target.workflow === undefined)
      throw new InvalidOptionError('target.workflow', 'rate limits are per workflow or group: name the workflow');
    const rateLimit = target.rateLimit === null ? null : checkRateLimit(target.rateLimit, 'rateLimit');
    // A typo must not write a limit (nor turn the namespace's controls on) for no workflow.
    await this.confirmWorkflow(target.workflow, 'setLimits');
    return this.control.setRateLimit(target.workflow, target.group, rateLimit);
  }

  /**
   * The caps stored in Redis that apply to a target: always the namespace cap, plus the workflow's
   * and the group's when named, and who set them (`setAtRuntime`: those set at runtime over a
   * declaration of code, with that declaration; absent when all are the code's).
   */
  getLimits(target: LimitTarget = {}): Promise<Limits> {
    return this.limits.get(target);
  }

  /**
   * Counts per state and active/cap per level, read in one call without scanning runs or
   * groups: its cost does not grow with the number of groups. (On data written by a version
   * without the count of due grouped runs, the first call counts each workflow's groups once to
   * set that count up.)
   * @param opts.workflow one workflow (default: every workflow a worker registered)
   * @param opts.groups include per-group counts for at most 1,000 groups per workflow (a few
   *   reads each); a workflow with more lists an arbitrary 1,000 of its groups with due or active
   *   runs — not the busiest — and says in `groupsOmitted` how many it left out
   */
  async stats(opts: { workflow?: WorkflowRef; groups?: boolean } = {}): Promise<QueueStats> {
    checkOptionKeys(opts, ['workflow', 'groups'], 'stats opts');
    const target = opts.workflow === undefined ? undefined : this.registry.resolve(opts.workflow);
    if (target && !target.known) await this.fleet.confirm(target.name, 'stats');
    const workflows = target ? [target.name] : [];
    return readStats(this.scripts.get(), this.keys, { workflows, groups: opts.groups === true });
  }

  /**
   * Moves this namespace's Redis data from an older key layout to the one this version uses,
   * and records it in the namespace's `schema` key. The module already runs it at bootstrap
   * (unless `migrate: false`); call it from a deploy step otherwise, or use the
   * `nest-sluice migrate` bin.
   *
   * Idempotent and safe from many processes at once: one of them migrates, under a lock in
   * Redis, in bounded batches (no call blocks Redis for long); the others wait for it (at most
   * 60 s, then `MigrationTimeoutError`), and once the namespace is current a call costs one GET.
   * Each of its Redis calls is repeatable (every write checks the lock token, every step is
   * idempotent), so one whose reply was lost is sent again within `redisTimeoutMs`, and calling
   * `migrate()` again after any error is safe.
   *
   * A namespace that holds data goes no further than layout 3, the newest older releases share,
   * unless `{ to: 4 }` asks for layout 4 (lean run records, about 120 bytes less per waiting run):
   * ask only once no older process uses the namespace (docs/upgrades.md). A new one starts at 4.
   * @returns the layout found, the layout now, and whether this call moved data
   * @throws InvalidOptionError for an unknown option or a `to` outside 3–4 (nothing is sent)
   * @throws QueueConfigError if the namespace is at a layout newer than this version knows (nothing is written)
   * @throws MigrationTimeoutError, MigrationLockLostError (call again), or a `RedisConnectionError`
   */
  async migrate(options: MigrateOptions = {}): Promise<MigrationResult> {
    checkOptionKeys(options, ['to'], 'migrate opts');
    this.migrator ??= createMigrator(this.options, this.connections, this.scripts, new Logger('Sluice'));
    const result = await this.migrator.migrate({ to: options.to });
    this.layout.found(result.to); // this process's own enqueues follow the layout it moved to
    return result;
  }

  /** Checks a pause target completely, then (for a workflow this process does not declare) that the fleet knows it. */
  private async controlTarget(target: PauseTarget, operation: string): Promise<{ workflow: string; group?: string }> {
    if (target === null || typeof target !== 'object') throw new InvalidInputError('target', 'must be an object { workflow, group? }');
    checkOptionKeys(target, ['workflow', 'group'], `${operation} target`);
    if (target.workflow === undefined) throw new InvalidInputError('target.workflow', 'is required');
    const checked = checkPauseTarget({ workflow: this.registry.resolve(target.workflow).name, group: target.group });
    await this.confirmWorkflow(checked.workflow, operation);
    return checked;
  }

  private async confirmWorkflow(name: string, operation: string): Promise<void> {
    if (!this.registry.resolve(name).known) await this.fleet.confirm(name, operation);
  }
}
