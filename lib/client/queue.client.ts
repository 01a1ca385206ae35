import { Inject, Injectable } from '@nestjs/common';
import { FleetWorkflowLookup } from '../discovery/fleet-workflows.lookup';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { batchMemberCall } from './batch.member';
import { InvalidInputError, SluiceError } from '../errors';
import { CLIENT_ENQUEUE_OPTIONS, type EnqueueOptions, type EnqueueRequest } from '../interfaces/enqueue.options';
import type { DedupeRequest } from '../interfaces/dedupe.options';
import type { LimitTarget, Limits } from '../interfaces/limits';
import type { RateLimit } from '../interfaces/rate-limit';
import type { MigrateOptions, MigrationResult } from '../migration/layout.migrator';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import type { ScheduleInfo } from '../schedule/schedule-info';
import type { ScheduleOptions } from '../interfaces/schedule.options';
import type { ListSchedulesOptions, SchedulePage } from '../schedule/schedule.store';
import { checkId } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';
import { buildEnqueueRequest } from '../workflow/enqueue.request';
import { checkInput, checkInputs } from '../workflow/schema.validate';
import { dedupeRequest } from '../workflow/dedupe.check';
import { dedupedHandle, runDeduped } from './dedupe.calls';
import { QueueAdmin } from './queue.admin';
import { QueueSchedules } from './queue.schedules';
import type { RunHandle } from './run.handle';
import { RUN_FIELDS, RunInfo, toRunInfo } from './run-info';
import type { ListRunsOptions, RetryAllOptions, RetryResult, RunPage } from './run.admin';
import { enqueueAndWait, mayOverlapEnqueue } from './run.caller';
import type { CancelOptions, CancelResult, PauseTarget } from './run.control';
import { RunEnqueuer } from './run.enqueuer';
import { EventPublisher } from './event.publisher';
import type { ListEventsOptions, PublishedEvent, PublishOptions, PublishResult } from './event.types';
import { RunSignals, SendEventOptions, SignalResult } from './run.signals';
import type { RunTimeline } from './run.timeline';
import { RunWaiter } from './run.waiter';
import type { QueueStats } from '../interfaces/queue.stats';
import { checkWaitValues, RUN_OPTIONS, WAIT_OPTIONS, type WaitOptions } from './wait.options';
import type { In, Out, WorkflowRef } from './workflow.ref';

/**
 * Enqueues runs, waits for their results and reads their state. Inject it anywhere once
 * `QueueModule` is imported; it works in producer-only processes too. It also offers the calls of
 * {@link QueueAdmin} (operators') and {@link QueueSchedules} (cron schedules), each a one-line
 * hand-over to that service.
 */
@Injectable()
export class QueueClient {
  /** @internal Nest constructs it from Sluice's internal services: inject `QueueClient` instead. */
  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly registry: WorkflowRegistry,
    private readonly connections: RedisConnections,
    private readonly keys: RedisKeys,
    private readonly fleet: FleetWorkflowLookup,
    private readonly enqueuer: RunEnqueuer,
    private readonly waiter: RunWaiter,
    private readonly signals: RunSignals,
    private readonly admin: QueueAdmin,
    private readonly schedules: QueueSchedules,
    private readonly events: EventPublisher,
  ) {}

  /**
   * Enqueues one run (one Redis call; enqueues made while others are in flight share calls, one
   * per workflow and event-loop turn). With an `id` that exists, returns that run and writes
   * nothing. A reply lost to a dropped connection is retried within `redisTimeoutMs` (enqueue is
   * idempotent on the id); past it the call rejects with `OutcomeUnknownError` naming the run id.
   * With an input schema known here (the contract's, or the `@Workflow`'s), a refused input
   * throws `InputValidationError` before any Redis call. With a dedupe (`opts.dedupe`, or the
   * `@Workflow`'s when enqueued by class) the call goes through its window instead (one script
   * call, never shared): the handle names the window's run and says what became of the call
   * (`handle.dedupe`); see docs/dedupe.md.
   */
  async enqueue<W extends WorkflowRef>(workflow: W, input: In<W>, opts?: EnqueueOptions): Promise<RunHandle<Out<W>>> {
    const target = this.registry.resolve(workflow);
    if (target.batch) {
      const member = batchMemberCall(target.batch, target, input, opts, this.options.maxPayloadBytes, CLIENT_ENQUEUE_OPTIONS);
      return this.handle(member.request.id, (await this.enqueuer.storeMember({ ...member, waited: '' })).created);
    }
    const request = buildEnqueueRequest(target, input, opts, this.options.maxPayloadBytes, CLIENT_ENQUEUE_OPTIONS);
    // Two property reads for an enqueue without one: the dedupe is looked at only when there is one.
    const dedupe = opts?.dedupe !== undefined || target.dedupe ? dedupeRequest(opts?.dedupe, target.dedupe, input, request) : undefined;
    const checking = checkInput(target, input);
    if (checking) await checking;
    // Only for a workflow this process does not declare (one SISMEMBER, the first time per name).
    if (!target.known) await this.fleet.confirm(target.name, 'enqueue');
    if (dedupe) return this.enqueueDeduped(request, dedupe);
    return this.handle(request.id, await this.enqueuer.store(request));
  }

  /**
   * enqueue's dedupe branch, apart: a closure in enqueue itself would make every call allocate its
   * context, dedupe or not (the cost issue 30 measured on the attempt path).
   */
  private async enqueueDeduped<Out>(request: EnqueueRequest, dedupe: DedupeRequest): Promise<RunHandle<Out>> {
    return dedupedHandle(await this.enqueuer.storeDeduped(request, dedupe), dedupe, (id, o) => this.wait(id, o));
  }

  /**
   * Enqueues many runs in one round trip. Every item is validated first: one bad item rejects
   * the whole call and nothing is written. A dedupe is refused (an item's, or the `@Workflow`'s
   * unless the item passes `dedupe: false`): enqueue those with `enqueue`.
   */
  async enqueueMany<W extends WorkflowRef>(
    workflow: W,
    items: Array<{ input: In<W>; opts?: EnqueueOptions }>,
  ): Promise<RunHandle<Out<W>>[]> {
    if (!Array.isArray(items)) throw new InvalidInputError('items', 'must be an array of { input, opts? }');
    const definition = this.registry.resolve(workflow);
    if (definition.batch) {
      const stored = await this.enqueuer.storeMembers(definition.batch, definition, items);
      return stored.map(({ id, created }) => this.handle(id, created));
    }
    const requests = this.enqueuer.requests(definition, items);
    const checking = checkInputs(definition, items);
    if (checking) await checking;
    if (requests.length === 0) return [];
    if (!definition.known) await this.fleet.confirm(definition.name, 'enqueueMany');
    const created = await this.enqueuer.storeMany(definition.name, requests);
    return requests.map((request, index) => this.handle(request.id, created[index]));
  }

  /**
   * Enqueues a run and waits for its result: `enqueue(...).then(h => h.result({ timeoutMs }))`,
   * in one round trip: the enqueue names this process's inbox, a channel subscribed once, on
   * which the run's end is announced with its outcome (see RunWaiter). The first call (or one
   * made while the inbox is not subscribed, or with `onProgress`) waits on the run's own channel,
   * subscribed alongside the enqueue where that is safe (see mayOverlapEnqueue), else before it. Every error it rejects with once the enqueue was acknowledged carries the run's
   * id as `error.runId` (see {@link SluiceError.runId}): `wait` for it or enqueue again with that id
   * rather than starting a second run. With a dedupe, it enqueues first and then waits on the run the
   * window names (two round trips): every caller folded into one run gets its result.
   */
  async run<W extends WorkflowRef>(workflow: W, input: In<W>, opts?: EnqueueOptions & WaitOptions): Promise<Out<W>> {
    checkWaitValues(opts);
    const target = this.registry.resolve(workflow);
    const member = target.batch && batchMemberCall(target.batch, target, input, opts, this.options.maxPayloadBytes, RUN_OPTIONS);
    const request = member ? member.request : buildEnqueueRequest(target, input, opts, this.options.maxPayloadBytes, RUN_OPTIONS);
    const dedupe =
      !member && (opts?.dedupe !== undefined || target.dedupe) ? dedupeRequest(opts?.dedupe, target.dedupe, input, request) : undefined;
    const checking = checkInput(target, input);
    if (checking) await checking;
    if (!target.known) await this.fleet.confirm(target.name, 'run');
    // Refused before anything is written: a caller retrying with a fresh id must not duplicate work.
    if (this.waiter.closed) throw new SluiceError('QueueModule is shutting down; run() was refused before enqueueing');
    if (dedupe) return (await runDeduped(this.enqueuer, request, dedupe, (id, o) => this.wait(id, o), opts)) as Out<W>;
    const call = {
      runId: request.id,
      enqueue: member
        ? (waitedBy: string) => this.enqueuer.storeMember({ ...member, waited: waitedBy })
        : (waitedBy: string) => this.enqueuer.storeWaited(request, waitedBy),
      timeoutMs: opts?.timeoutMs,
      onProgress: opts?.onProgress,
    };
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
    checkWaitValues(opts);
    // Over the process's inbox when it is live and no progress is asked for: one call, no subscribe.
    if (!opts?.onProgress && this.waiter.inboxReady()) return (await this.waiter.watchOnInbox(runId, opts?.timeoutMs)) as T;
    return (await this.waiter.wait(runId, opts?.timeoutMs, undefined, opts?.onProgress)) as T;
  }

  /** The run's stored state, or `null` if it does not exist (or its retention expired). */
  async get<T = unknown>(runId: string): Promise<RunInfo<T> | null> {
    checkId(runId, 'runId');
    const values = await this.connections.command.call('get', (redis) => redis.hmget(this.keys.run(runId), ...RUN_FIELDS), {
      idempotent: true,
    });
    return toRunInfo(runId, values) as RunInfo<T> | null;
  }

  /**
   * The member run ids of batch run `batchId`, in enqueue order (see docs/batches.md; a member's
   * `get()` names its batch as `batch`), or `null` if there is no such batch or its retention
   * expired. One read.
   */
  async batchMembers(batchId: string): Promise<string[] | null> {
    checkId(batchId, 'batchId');
    const ids = await this.connections.command.call('batchMembers', (redis) => redis.lrange(this.keys.batch(batchId), 0, -1), {
      idempotent: true,
    });
    return ids.length > 0 ? ids : null;
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
   * Publishes an event, in one script call: starts one run of every workflow subscribed to `name`
   * (`@Workflow({ on })`, registered in Redis by the workers' bootstraps, so a producer without
   * those classes publishes too), with `payload` as its input and the id `evt:<event id>:<workflow>`,
   * and resumes the runs waiting in `ctx.waitForEvent(name, { key })` as {@link sendEvent} does
   * (`sendEvent` only resumes waits and starts nothing). Idempotent on `opts.id`: publishing an
   * id again — from any producer, concurrently too — starts nothing and resolves with the same
   * runs (`published: false`), while the event's record is kept (`resultTtlMs`). A reply lost to a
   * dropped connection is retried within `redisTimeoutMs`; past it `OutcomeUnknownError` (publish
   * again with the same id). See docs/triggers.md.
   * @throws InvalidNameError / InvalidOptionError / PayloadTooLargeError / PayloadNotSerializableError,
   *   and `InputValidationError` from the input schema of a subscribed workflow this process
   *   declares, before any Redis call; EventIdConflictError for an id published under another name
   */
  async publish<P = unknown>(name: string, payload: P, opts?: PublishOptions): Promise<PublishResult> {
    const { id, published, runs, resumed } = await this.events.publish(name, payload, opts);
    const handles = runs.map(({ workflow, runId, created }) => ({ workflow, ...this.handle<unknown>(runId, created) }));
    return { id, name, published, runs: handles, resumed };
  }

  /** A published event's record (its runs), or `null` once it expired. @see {@link publish} */
  getEvent(id: string): Promise<PublishedEvent | null> {
    return this.events.get(id);
  }

  /** The newest events published under a name whose records are kept, newest first. @see {@link publish} */
  listEvents(opts: ListEventsOptions): Promise<PublishedEvent[]> {
    return this.events.list(opts);
  }

  /** The run's steps and waits, attempt by attempt. @see {@link QueueAdmin.timeline} */
  timeline(runId: string): Promise<RunTimeline | null> {
    return this.admin.timeline(runId);
  }

  /** A page of a workflow's runs in one state. @see {@link QueueAdmin.listRuns} */
  listRuns(opts: ListRunsOptions): Promise<RunPage> {
    return this.admin.listRuns(opts);
  }

  /** Puts a failed or cancelled run back to waiting. @see {@link QueueAdmin.retry} */
  retry(runId: string): Promise<RetryResult> {
    return this.admin.retry(runId);
  }

  /** Retries a workflow's failed (or cancelled) runs; resolves with how many. @see {@link QueueAdmin.retryAll} */
  retryAll(opts: RetryAllOptions): Promise<number> {
    return this.admin.retryAll(opts);
  }

  /** Deletes a finished run; `false` if there was none. @see {@link QueueAdmin.remove} */
  remove(runId: string): Promise<boolean> {
    return this.admin.remove(runId);
  }

  /** Sets a fleet-wide cap at runtime; resolves with the previous one. @see {@link QueueAdmin.setLimits} */
  setLimits(target: LimitTarget & { limit: number | null }): Promise<number | null>;
  /** Sets a fleet-wide rate limit at runtime; resolves with the previous one. @see {@link QueueAdmin.setLimits} */
  setLimits(target: LimitTarget & { rateLimit: RateLimit | null }): Promise<RateLimit | null>;
  setLimits(target: LimitTarget & { limit?: number | null; rateLimit?: RateLimit | null }): Promise<number | RateLimit | null> {
    return this.admin.setLimits(target as LimitTarget & { limit: number | null });
  }

  /** The caps stored in Redis that apply to a target. @see {@link QueueAdmin.getLimits} */
  getLimits(target: LimitTarget = {}): Promise<Limits> {
    return this.admin.getLimits(target);
  }

  /** Cancels a run that has not finished, fleet-wide. @see {@link QueueAdmin.cancel} */
  cancel(runId: string, opts?: CancelOptions): Promise<CancelResult> {
    return this.admin.cancel(runId, opts);
  }

  /** Pauses a workflow, or one group of it, fleet-wide; `false` if it was paused already. @see {@link QueueAdmin.pause} */
  pause(target: PauseTarget): Promise<boolean> {
    return this.admin.pause(target);
  }

  /** Lets a paused workflow or group start runs again; `false` if it was not paused. @see {@link QueueAdmin.resume} */
  resume(target: PauseTarget): Promise<boolean> {
    return this.admin.resume(target);
  }

  /** Counts per state and active/cap per level, in one call. @see {@link QueueAdmin.stats} */
  stats(opts: { workflow?: WorkflowRef; groups?: boolean } = {}): Promise<QueueStats> {
    return this.admin.stats(opts);
  }

  /** Creates or replaces a cron schedule. @see {@link QueueSchedules.set} */
  schedule<W extends WorkflowRef>(id: string, workflow: W, opts: ScheduleOptions<In<W>>): Promise<ScheduleInfo<In<W>>> {
    return this.schedules.set(id, workflow, opts);
  }

  /** Deletes a schedule; `false` if there was none. @see {@link QueueSchedules.remove} */
  unschedule(id: string): Promise<boolean> {
    return this.schedules.remove(id);
  }

  /** Stops a schedule firing, fleet-wide, until {@link resumeSchedule}. @see {@link QueueSchedules.pause} */
  pauseSchedule(id: string): Promise<ScheduleInfo> {
    return this.schedules.pause(id);
  }

  /** Fires a paused schedule again from its next occurrence. @see {@link QueueSchedules.resume} */
  resumeSchedule(id: string): Promise<ScheduleInfo> {
    return this.schedules.resume(id);
  }

  /** A schedule with its next fire times, or `null`. @see {@link QueueSchedules.get} */
  getSchedule<I = unknown>(id: string): Promise<ScheduleInfo<I> | null> {
    return this.schedules.get<I>(id);
  }

  /** Schedules in id order, a page at a time. @see {@link QueueSchedules.list} */
  listSchedules(opts: ListSchedulesOptions = {}): Promise<SchedulePage> {
    return this.schedules.list(opts);
  }

  /** Moves this namespace's Redis data to the key layout this version uses. @see {@link QueueAdmin.migrate} */
  migrate(options?: MigrateOptions): Promise<MigrationResult> {
    return this.admin.migrate(options);
  }

  private handle<T>(id: string, created: boolean): RunHandle<T> {
    return { id, created, result: (opts) => this.wait<T>(id, opts) };
  }
}
