import { Inject, Injectable, Logger } from '@nestjs/common';
import { InvalidInputError, InvalidOptionError, OutcomeUnknownError, RedisCommandError, SluiceError } from '../errors';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { FleetWorkflowLookup } from '../discovery/fleet-workflows.lookup';
import type { WorkflowContract } from '../workflow/workflow.contract';
import { RESOLVED_QUEUE_OPTIONS } from '../queue.constants';
import type { ResolvedQueueOptions } from '../queue.options';
import type { LayoutMigrator, MigrationResult } from '../migration/layout.migrator';
import { createMigrator } from '../migration/migration.runner';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import { checkInteger } from '../util/duration';
import { checkId } from '../util/names';
import type { WorkflowClass, WorkflowInput, WorkflowOutput } from '../workflow/workflow.types';
import type { Jsonified } from '../workflow/json.roundtrip';
import { buildEnqueueRequest, ENQUEUE_OPTIONS, EnqueueOptions, EnqueueRequest } from './enqueue.options';
import { EnqueueBatcher } from './enqueue.batcher';
import { enqueueArgs, enqueueChunks, enqueueKeys, enqueueManyArgs, enqueueManyKeys, EnqueueSettings, newNonce } from './enqueue.script';
import { activateGroups, checkLimit, EVERY_GROUP, LimitTarget, limitField, Limits, runtimeFields, toRuntimeOverrides } from './limits';
import { RUN_FIELDS, RunInfo, toRunInfo } from './run-info';
import { ListRunsOptions, RetryAllOptions, RetryResult, RunAdmin, RunPage } from './run.admin';
import { CancelOptions, CancelResult, checkPauseTarget, PauseTarget, rateFields, RunControl } from './run.control';
import { checkRateLimit, RateLimit, toRateLimit } from './rate-limit';
import { parseStats, QueueStats } from './stats';
import { RunWaiter } from './run.waiter';
import { enqueueAndWait, mayOverlapEnqueue } from './run.caller';
import { RunSignals, SendEventOptions, SignalResult } from './run.signals';
import { readTimeline, type RunTimeline } from './run.timeline';
import { buildScheduleSpec, ScheduleOptions } from '../schedule/schedule.options';
import type { ScheduleInfo } from '../schedule/schedule-info';
import { ListSchedulesOptions, SchedulePage, ScheduleStore } from '../schedule/schedule.store';
import { telemetryApi, type OtelApi } from '../telemetry/otel.loader';
import { captureTrace } from '../telemetry/trace.carrier';
import { checkOptionKeys } from '../util/option-keys';

/** A handle on an enqueued run. */
export interface RunHandle<Out = unknown> {
  readonly id: string;
  /** `false` when the id already existed and the existing run was returned (idempotent enqueue). */
  readonly created: boolean;
  /** Waits for the run's result; see {@link QueueClient.wait}. */
  result(opts?: WaitOptions): Promise<Out>;
}

export interface WaitOptions {
  /** Give up after this many ms with `WaitTimeoutError` (the run carries on). Default: no limit. */
  timeoutMs?: number;
  /**
   * Called with the run's progress values (`ctx.progress`): first the stored one, if any, then
   * each one the worker writes, in order, never twice and never after the wait settled. Values
   * may be skipped (the worker writes at most one every 250 ms, and a value published while the
   * subscriber reconnects is caught up by the next read only if it is still the latest). What it
   * throws is ignored. Without it, the wait subscribes to nothing more than the run's outcome.
   */
  onProgress?: (value: unknown) => void;
}

/** The keys of {@link WaitOptions}; `run()` takes them besides the enqueue's. */
const WAIT_OPTIONS: readonly string[] = ['timeoutMs', 'onProgress'];
const RUN_OPTIONS: readonly string[] = [...ENQUEUE_OPTIONS, ...WAIT_OPTIONS];

/**
 * A workflow given by its class or by a contract from `defineWorkflow` (types inferred), or by
 * its name (typed `unknown`). A name or contract that no `@Workflow` of this process declares must
 * have been registered in Redis by some worker's bootstrap.
 */
export type WorkflowRef = WorkflowClass | WorkflowContract<any, any> | string;
type In<W> = W extends string ? unknown : WorkflowInput<W>;
/** What the caller receives: the run's result after its JSON round trip through Redis (a `Date` is a string). */
type Out<W> = W extends string ? unknown : Jsonified<WorkflowOutput<W>>;

/**
 * Enqueues runs, waits for their results and reads their state. Inject it anywhere once
 * `QueueModule` is imported; it works in producer-only processes too.
 */
@Injectable()
export class QueueClient {
  private readonly keys: RedisKeys;
  private migrator?: LayoutMigrator;
  private schedules?: ScheduleStore;
  private readonly fleet: FleetWorkflowLookup;
  /** Set only with telemetry on: enqueues then store the caller's trace context with the run. */
  private readonly otel: OtelApi | undefined;
  private readonly enqueueSettings: EnqueueSettings;
  private readonly control: RunControl;
  private readonly admin: RunAdmin;
  private readonly signals: RunSignals;
  private readonly batcher: EnqueueBatcher;

  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly registry: WorkflowRegistry,
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScriptsProvider,
    private readonly waiter: RunWaiter,
  ) {
    this.keys = new RedisKeys(options.prefix, options.namespace);
    this.fleet = new FleetWorkflowLookup(connections.command, this.keys);
    this.otel = telemetryApi(options);
    this.enqueueSettings = { fastPath: options.fastPath, lockMs: options.worker.lockMs, compact: options.compactRunRecords };
    this.control = new RunControl(() => this.scripts.get(), this.keys, options);
    this.admin = new RunAdmin(scripts, this.keys, registry, this.fleet);
    this.signals = new RunSignals(scripts, this.keys, options);
    this.batcher = new EnqueueBatcher({ one: (request) => this.storeOne(request), chunk: (workflow, chunk) => this.storeChunk(workflow, chunk) });
  }

  /**
   * Enqueues one run (one Redis call; enqueues made while others are in flight share calls, one
   * per workflow and event-loop turn). With an `id` that exists, returns that run and writes
   * nothing. A reply lost to a dropped connection is retried within `redisTimeoutMs` (enqueue is
   * idempotent on the id); past it the call rejects with `OutcomeUnknownError` naming the run id.
   */
  async enqueue<W extends WorkflowRef>(workflow: W, input: In<W>, opts?: EnqueueOptions): Promise<RunHandle<Out<W>>> {
    const target = this.registry.resolve(workflow);
    const request = buildEnqueueRequest(target, input, opts, this.options.maxPayloadBytes);
    // Only for a workflow this process does not declare (one SISMEMBER, the first time per name).
    if (!target.known) await this.fleet.confirm(target.name, 'enqueue');
    return this.handle(request.id, await this.store(request));
  }

  /**
   * Enqueues many runs in one round trip. Every item is validated first: one bad item rejects
   * the whole call and nothing is written.
   */
  async enqueueMany<W extends WorkflowRef>(workflow: W, items: Array<{ input: In<W>; opts?: EnqueueOptions }>): Promise<RunHandle<Out<W>>[]> {
    if (!Array.isArray(items)) throw new InvalidInputError('items', 'must be an array of { input, opts? }');
    const definition = this.registry.resolve(workflow);
    const requests = items.map((item, index) => {
      if (item === null || typeof item !== 'object') throw new InvalidInputError(`items[${index}]`, 'must be an object { input, opts? }');
      try {
        return buildEnqueueRequest(definition, item.input, item.opts, this.options.maxPayloadBytes);
      } catch (error) {
        if (error instanceof InvalidInputError) (error as { message: string }).message = `items[${index}].${error.message}`;
        throw error;
      }
    });
    if (requests.length === 0) return [];
    if (!definition.known) await this.fleet.confirm(definition.name, 'enqueueMany');
    const scripts = this.scripts.get();
    const nonce = newNonce();
    const trace = this.otel && captureTrace(this.otel); // one context for the whole batch
    const chunks = enqueueChunks(requests);
    const replies = await scripts.pipeline(
      'enqueueMany',
      (pipeline) => chunks.forEach((chunk) => scripts.queue(pipeline, 'enqueue-many', enqueueManyKeys(this.keys), enqueueManyArgs(this.keys, this.enqueueSettings, definition.name, chunk, nonce, trace))),
      { idempotent: true },
    );
    return chunks.flatMap((chunk, index) => {
      const [error, created] = replies[index] ?? [new Error('no reply')];
      if (error) throw new RedisCommandError('enqueueMany', error);
      return chunk.map((request, k) => this.handle(request.id, (created as number[])[k] === 1));
    });
  }

  /**
   * Enqueues a run and waits for its result: `enqueue(...).then(h => h.result({ timeoutMs }))`,
   * with the subscribe overlapping the enqueue where that is safe (see mayOverlapEnqueue), else
   * live before it. Every error it rejects with once the enqueue was acknowledged carries the run's
   * id as `error.runId` (see {@link SluiceError.runId}): `wait` for it or enqueue again with that id
   * rather than starting a second run.
   */
  async run<W extends WorkflowRef>(workflow: W, input: In<W>, opts?: EnqueueOptions & WaitOptions): Promise<Out<W>> {
    if (opts?.timeoutMs !== undefined) checkTimeout(opts.timeoutMs);
    checkOnProgress(opts?.onProgress);
    const target = this.registry.resolve(workflow);
    const request = buildEnqueueRequest(target, input, opts, this.options.maxPayloadBytes, RUN_OPTIONS);
    if (!target.known) await this.fleet.confirm(target.name, 'run');
    // Refused before anything is written: a caller retrying with a fresh id must not duplicate work.
    if (this.waiter.closed) throw new SluiceError('QueueModule is shutting down; run() was refused before enqueueing');
    const call = { runId: request.id, enqueue: () => this.store(request, true), timeoutMs: opts?.timeoutMs, onProgress: opts?.onProgress };
    return (await enqueueAndWait(this.waiter, call, mayOverlapEnqueue(this.registry, target.name))) as Out<W>;
  }

  /**
   * Waits until the run finishes. Resolves with its result; rejects with `RunCancelledError` if it
   * was cancelled, `WorkflowFailedError`
   * if it failed for good, `WaitTimeoutError` after `timeoutMs`, `RunNotFoundError` if no such run.
   */
  async wait<T = unknown>(runId: string, opts?: WaitOptions): Promise<T> {
    checkId(runId, 'runId');
    checkOptionKeys(opts, WAIT_OPTIONS);
    if (opts?.timeoutMs !== undefined) checkTimeout(opts.timeoutMs);
    checkOnProgress(opts?.onProgress);
    return (await this.waiter.wait(runId, opts?.timeoutMs, undefined, opts?.onProgress)) as T;
  }

  /** The run's stored state, or `null` if it does not exist (or its retention expired). */
  async get<T = unknown>(runId: string): Promise<RunInfo<T> | null> {
    checkId(runId, 'runId');
    const values = await this.connections.command.call('get', (redis) => redis.hmget(this.keys.run(runId), ...RUN_FIELDS), { idempotent: true });
    return toRunInfo(runId, values) as RunInfo<T> | null;
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
   * Sends a signal to one run (one script call). If the run waits in `ctx.waitForSignal(name)`, it
   * resumes with `payload`; otherwise the signal is kept in the run's mailbox (at most 100, oldest
   * first per name) for its next wait of that name, and dropped when the run finishes.
   * @throws RunNotFoundError (no such run), RunStateError (it has finished),
   *   SignalMailboxFullError; InvalidNameError / PayloadTooLargeError / PayloadNotSerializableError
   *   before any Redis call. Not retried after a lost reply (it could queue the signal twice):
   *   `OutcomeUnknownError` then.
   */
  signal(runId: string, name: string, payload?: unknown): Promise<SignalResult> {
    return this.signals.signal(runId, name, payload);
  }

  /**
   * Resumes every run waiting in `ctx.waitForEvent(name, { key })` with `payload`, in batches of
   * 500 runs per script call; only the runs waiting on this name and key are visited. Runs that
   * are not waiting yet never see the event (it is not stored). Resolves with how many runs resumed.
   * @throws InvalidNameError / PayloadTooLargeError / PayloadNotSerializableError before any Redis call
   */
  sendEvent(name: string, opts?: SendEventOptions): Promise<number> {
    return this.signals.sendEvent(name, opts);
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
    return this.admin.listRuns(opts);
  }

  /**
   * Puts a failed or cancelled run back to waiting, in one atomic script: it gets a full set of
   * attempts and resumes at the step that failed (its finished steps are not executed again).
   * A run that failed with a child's `ChildWorkflowFailedError` loses the child failures in its
   * memo, so it waits for those children again: retry the (fixed) child first, then the parent.
   * @throws RunNotFoundError, RunStateError (a run in another state; nothing written)
   */
  retry(runId: string): Promise<RetryResult> {
    return this.admin.retry(runId);
  }

  /**
   * Retries a workflow's failed (or cancelled) runs, oldest first, in batches of at most 500 per
   * Redis call, up to `limit`; runs that fail again meanwhile are not taken twice.
   * @returns how many runs were retried
   */
  retryAll(opts: RetryAllOptions): Promise<number> {
    return this.admin.retryAll(opts);
  }

  /**
   * Deletes a finished run (its record, step memo and index entry); its id can be enqueued again.
   * @returns false if there was no such run
   * @throws RunStateError for a run not finished (cancel it first)
   */
  remove(runId: string): Promise<boolean> {
    return this.admin.remove(runId);
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
    const field = limitField(target);
    if (target.rateLimit !== undefined) {
      if (target.limit !== undefined) throw new InvalidOptionError('target', 'set either limit or rateLimit in one call, not both');
      if (target.workflow === undefined) throw new InvalidOptionError('target.workflow', 'rate limits are per workflow or group: name the workflow');
      const rateLimit = target.rateLimit === null ? null : checkRateLimit(target.rateLimit, 'rateLimit');
      // A typo must not write a limit (nor turn the namespace's controls on) for no workflow.
      await this.confirmWorkflow(target.workflow, 'setLimits');
      return this.control.setRateLimit(target.workflow, target.group, rateLimit);
    }
    const limit = checkLimit(target.limit);
    const scripts = this.scripts.get();
    const [previous, cursor] = await scripts.run<[string, string]>('set-limits', [this.keys.limits, this.keys.seq], [
      this.keys.base, field, limit ?? '', target.workflow ?? '', target.group ?? '',
    ]);
    // Only for every group's default: set-limits visited the first batch of groups, the rest follow.
    if (cursor !== '0') await activateGroups(scripts, this.keys, target.workflow ?? '', cursor);
    return previous === '' ? null : Number(previous);
  }

  /**
   * The caps stored in Redis that apply to a target: always the namespace cap, plus the workflow's
   * and the group's when named, and who set them (`setAtRuntime`: those set at runtime over a
   * declaration of code, with that declaration; absent when all are the code's).
   */
  async getLimits(target: LimitTarget = {}): Promise<Limits> {
    limitField(target); // validates
    const { workflow, group } = target;
    const fields = ['ns', ...(workflow ? [limitField({ workflow }), limitField({ workflow, group: EVERY_GROUP })] : [])];
    if (workflow && group && group !== EVERY_GROUP) fields.push(limitField({ workflow, group }));
    const rates = workflow ? rateFields(workflow, group) : [];
    const origins = runtimeFields(workflow);
    const [values, setters] = await this.connections.command.call(
      'getLimits',
      (redis) => Promise.all([redis.hmget(this.keys.limits, ...fields, ...rates), redis.hmget(this.keys.runtimeLimits, ...origins.map(([, field]) => field))]),
      { idempotent: true },
    );
    const setAtRuntime = toRuntimeOverrides(origins, setters);
    const [ns, wf, groupDefault, override] = values.slice(0, fields.length).map((v) => (v === null ? null : Number(v)));
    if (!workflow) return { namespace: ns, ...(setAtRuntime && { setAtRuntime }) };
    const [rate, rateMs, groupRate, groupRateMs, groupRateOverride, groupRateOverrideMs] = values.slice(fields.length);
    const limits: Limits = { namespace: ns, workflow: wf, groupDefault, rateLimit: toRateLimit(rate, rateMs), groupRateLimit: toRateLimit(groupRate, groupRateMs) };
    if (group && group !== EVERY_GROUP) {
      const rateOverride = toRateLimit(groupRateOverride, groupRateOverrideMs);
      Object.assign(limits, { groupOverride: override, group: override ?? groupDefault, groupRateOverride: rateOverride, groupRate: rateOverride ?? limits.groupRateLimit });
    }
    if (setAtRuntime) limits.setAtRuntime = setAtRuntime;
    return limits;
  }

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
   * Counts per state and active/cap per level, read in one call without scanning runs or
   * groups: its cost does not grow with the number of groups. (Once after upgrading from a
   * version without the count of due grouped runs, the first call counts each workflow's groups
   * to set that count up.)
   * @param opts.workflow one workflow (default: every workflow a worker registered)
   * @param opts.groups include per-group counts for at most 1,000 groups per workflow (a few
   *   reads each); a workflow with more lists an arbitrary 1,000 of its groups with due or active
   *   runs — not the busiest — and says in `groupsOmitted` how many it left out
   */
  async stats(opts: { workflow?: WorkflowRef; groups?: boolean } = {}): Promise<QueueStats> {
    const target = opts.workflow === undefined ? undefined : this.registry.resolve(opts.workflow);
    if (target && !target.known) await this.fleet.confirm(target.name, 'stats');
    const workflows = target ? [target.name] : [];
    const reply = await this.scripts.get().run<unknown[]>('stats', [this.keys.leases, this.keys.limits], [this.keys.base, opts.groups ? 1 : 0, ...workflows], { idempotent: true });
    return parseStats(reply, opts.groups === true);
  }

  /**
   * Creates or replaces a cron schedule: each occurrence starts one run of `workflow` with the
   * id `<id>@<occurrence ms>` (so a fire is idempotent), fired by the reserve calls the
   * workers already make — exactly once per occurrence across the fleet. Replacing a schedule
   * with a different definition restarts its plan from now; an unchanged one is left as it is.
   * A paused schedule stays paused.
   *
   * Schedules declared on `@Workflow({ schedules })` are rewritten by the next worker bootstrap:
   * make lasting changes to those in code.
   * @param id unique per namespace (letters, digits, `.`, `_`, `-`)
   * @throws InvalidScheduleError (cron or time zone), UnknownWorkflowError, InvalidNameError,
   *   InvalidOptionError, PayloadNotSerializableError / PayloadTooLargeError (input) before any
   *   Redis call; ScheduleConflictError if `id` belongs to another workflow (nothing written)
   */
  async schedule<W extends WorkflowRef>(id: string, workflow: W, opts: ScheduleOptions<In<W>>): Promise<ScheduleInfo<In<W>>> {
    const target = this.registry.resolve(workflow);
    const spec = buildScheduleSpec(id, target, opts, 'opts', this.options.maxPayloadBytes);
    if (!target.known) await this.fleet.confirm(target.name, 'schedule');
    const store = this.scheduleStore();
    await store.write(spec);
    return (await store.get(id)) as ScheduleInfo<In<W>>;
  }

  /** Deletes a schedule (runs it already started are left alone); `false` if there was none. */
  unschedule(id: string): Promise<boolean> {
    return this.scheduleStore().remove(id);
  }

  /** Stops a schedule firing, fleet-wide, until {@link resumeSchedule}. @throws ScheduleNotFoundError */
  pauseSchedule(id: string): Promise<ScheduleInfo> {
    return this.scheduleStore().pause(id);
  }

  /** Fires a paused schedule again from its next occurrence after now (none is owed for the pause). @throws ScheduleNotFoundError */
  resumeSchedule(id: string): Promise<ScheduleInfo> {
    return this.scheduleStore().resume(id);
  }

  /** A schedule with its next fire times, or `null`. */
  getSchedule<I = unknown>(id: string): Promise<ScheduleInfo<I> | null> {
    return this.scheduleStore().get(id) as Promise<ScheduleInfo<I> | null>;
  }

  /** Schedules in id order, a page at a time (one call per page, whatever the total). */
  listSchedules(opts: ListSchedulesOptions = {}): Promise<SchedulePage> {
    return this.scheduleStore().list(opts);
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
   * @returns the layout found, the layout now, and whether this call moved data
   * @throws QueueConfigError if the namespace is at a layout newer than this version knows (nothing is written)
   * @throws MigrationTimeoutError, MigrationLockLostError (call again), or a `RedisConnectionError`
   */
  migrate(): Promise<MigrationResult> {
    this.migrator ??= createMigrator(this.options, this.connections, this.scripts, new Logger('Sluice'));
    return this.migrator.migrate();
  }

  /** Checks a pause target completely, then (for a workflow this process does not declare) that the fleet knows it. */
  private async controlTarget(target: PauseTarget, operation: string): Promise<{ workflow: string; group?: string }> {
    if (target === null || typeof target !== 'object') throw new InvalidInputError('target', 'must be an object { workflow, group? }');
    if (target.workflow === undefined) throw new InvalidInputError('target.workflow', 'is required');
    const checked = checkPauseTarget({ workflow: this.registry.resolve(target.workflow).name, group: target.group });
    await this.confirmWorkflow(checked.workflow, operation);
    return checked;
  }

  private async confirmWorkflow(name: string, operation: string): Promise<void> {
    if (!this.registry.resolve(name).known) await this.fleet.confirm(name, operation);
  }

  private scheduleStore(): ScheduleStore {
    return (this.schedules ??= new ScheduleStore(this.scripts.get(), this.connections.command, this.keys));
  }

  /**
   * Stores one run; resolves true if it is new, false if the id existed. `waited`: publish its
   * outcome. Concurrent calls without those extras share script calls (see EnqueueBatcher).
   */
  private store(request: EnqueueRequest, waited = false): Promise<boolean> {
    const trace = this.otel && captureTrace(this.otel);
    if (waited || trace !== undefined) return this.storeOne(request, waited, trace);
    return this.batcher.store(request);
  }

  /** The enqueue script for one run. */
  private async storeOne(request: EnqueueRequest, waited = false, trace?: string): Promise<boolean> {
    try {
      const args = enqueueArgs(this.keys, this.enqueueSettings, request, newNonce(), waited, trace);
      const [created] = await this.scripts.get().run<[number, string]>('enqueue', enqueueKeys(this.keys, request), args, { idempotent: true });
      return created === 1;
    } catch (error) {
      if (error instanceof OutcomeUnknownError) error.runId = request.id;
      throw error;
    }
  }

  /** The enqueue-many script for one chunk of one workflow's runs; resolves per run as {@link storeOne}. */
  private async storeChunk(workflow: string, chunk: EnqueueRequest[]): Promise<boolean[]> {
    const args = enqueueManyArgs(this.keys, this.enqueueSettings, workflow, chunk, newNonce());
    const created = await this.scripts.get().run<number[]>('enqueue-many', enqueueManyKeys(this.keys), args, { idempotent: true });
    return created.map((flag) => flag === 1);
  }

  private handle<T>(id: string, created: boolean): RunHandle<T> {
    return { id, created, result: (opts) => this.wait<T>(id, opts) };
  }
}

function checkOnProgress(onProgress: unknown): void {
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new InvalidOptionError('opts.onProgress', `must be a function, got ${typeof onProgress}`);
}

function checkTimeout(timeoutMs: number): void {
  checkInteger(timeoutMs, 'opts.timeoutMs', 0, 2_147_483_647);
}
