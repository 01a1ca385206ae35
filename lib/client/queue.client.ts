import { Inject, Injectable } from '@nestjs/common';
import { InvalidInputError } from '../errors';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_QUEUE_OPTIONS } from '../queue.constants';
import type { ResolvedQueueOptions } from '../queue.options';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import { checkInteger } from '../util/duration';
import { checkId } from '../util/names';
import type { WorkflowClass, WorkflowInput, WorkflowOutput } from '../workflow/workflow.types';
import { buildEnqueueRequest, EnqueueOptions, EnqueueRequest } from './enqueue.options';
import { checkLimit, EVERY_GROUP, LimitTarget, limitField, Limits } from './limits';
import { RUN_FIELDS, RunInfo, toRunInfo } from './run-info';
import { parseStats, QueueStats } from './stats';
import { RunWaiter } from './run.waiter';

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
}

/** A workflow given by its class (types inferred) or by its registered name. */
export type WorkflowRef = WorkflowClass | string;
type In<W> = W extends string ? unknown : WorkflowInput<W>;
type Out<W> = W extends string ? unknown : WorkflowOutput<W>;

/**
 * Enqueues runs, waits for their results and reads their state. Inject it anywhere once
 * `QueueModule` is imported; it works in producer-only processes too.
 */
@Injectable()
export class QueueClient {
  private readonly keys: RedisKeys;

  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly registry: WorkflowRegistry,
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScriptsProvider,
    private readonly waiter: RunWaiter,
  ) {
    this.keys = new RedisKeys(options.prefix, options.namespace);
  }

  /** Enqueues one run (one Redis call). With an `id` that exists, returns that run and writes nothing. */
  async enqueue<W extends WorkflowRef>(workflow: W, input: In<W>, opts?: EnqueueOptions): Promise<RunHandle<Out<W>>> {
    const request = buildEnqueueRequest(this.registry.resolve(workflow), input, opts, this.options.maxPayloadBytes);
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
      try {
        return buildEnqueueRequest(definition, item?.input, item?.opts, this.options.maxPayloadBytes);
      } catch (error) {
        if (error instanceof InvalidInputError) (error as { message: string }).message = `items[${index}].${error.message}`;
        throw error;
      }
    });
    if (requests.length === 0) return [];
    const scripts = this.scripts.get(); // before pipeline(): a pipeline copies the commands defined so far
    const pipeline = this.connections.command.pipeline();
    for (const request of requests) scripts.queue(pipeline, 'enqueue', this.enqueueKeys(request), this.enqueueArgs(request));
    const replies = (await pipeline.exec()) ?? [];
    return requests.map((request, index) => {
      const [error, reply] = replies[index] ?? [new Error('no reply')];
      if (error) throw error;
      return this.handle(request.id, (reply as [number])[0] === 1);
    });
  }

  /** Enqueues a run and waits for its result: `enqueue(...).then(h => h.result({ timeoutMs }))`. */
  async run<W extends WorkflowRef>(workflow: W, input: In<W>, opts?: EnqueueOptions & WaitOptions): Promise<Out<W>> {
    if (opts?.timeoutMs !== undefined) checkTimeout(opts.timeoutMs);
    const request = buildEnqueueRequest(this.registry.resolve(workflow), input, opts, this.options.maxPayloadBytes);
    return (await this.waiter.wait(request.id, opts?.timeoutMs, this.store(request, true))) as Out<W>;
  }

  /**
   * Waits until the run finishes. Resolves with its result; rejects with `WorkflowFailedError`
   * if it failed for good, `WaitTimeoutError` after `timeoutMs`, `RunNotFoundError` if no such run.
   */
  async wait<T = unknown>(runId: string, opts?: WaitOptions): Promise<T> {
    checkId(runId, 'runId');
    if (opts?.timeoutMs !== undefined) checkTimeout(opts.timeoutMs);
    return (await this.waiter.wait(runId, opts?.timeoutMs)) as T;
  }

  /** The run's stored state, or `null` if it does not exist (or its retention expired). */
  async get<T = unknown>(runId: string): Promise<RunInfo<T> | null> {
    checkId(runId, 'runId');
    const values = await this.connections.command.hmget(this.keys.run(runId), ...RUN_FIELDS);
    return toRunInfo(runId, values) as RunInfo<T> | null;
  }

  /**
   * Sets a fleet-wide cap at runtime (see {@link LimitTarget}); `limit: null` removes it. Runs
   * claimed from now on obey it; active runs keep their slots. A worker bootstrap writes the
   * caps its code declares again (the namespace, workflow and default group caps), so make
   * lasting changes in code; per-group overrides are only ever set here.
   * @returns the previous cap (`null` if there was none)
   */
  async setLimits(target: LimitTarget & { limit: number | null }): Promise<number | null> {
    const field = limitField(target);
    const limit = checkLimit(target.limit);
    const previous = await this.scripts.get().run<string>('set-limits', [this.keys.limits, this.keys.seq], [
      this.keys.base, field, limit ?? '', target.workflow ?? '', target.group ?? '',
    ]);
    return previous === '' ? null : Number(previous);
  }

  /** The caps stored in Redis that apply to a target: always the namespace cap, plus the workflow's and the group's when named. */
  async getLimits(target: LimitTarget = {}): Promise<Limits> {
    limitField(target); // validates
    const { workflow, group } = target;
    const fields = ['ns', ...(workflow ? [limitField({ workflow }), limitField({ workflow, group: EVERY_GROUP })] : [])];
    if (workflow && group && group !== EVERY_GROUP) fields.push(limitField({ workflow, group }));
    const [ns, wf, groupDefault, override] = (await this.connections.command.hmget(this.keys.limits, ...fields)).map((v) => (v === null ? null : Number(v)));
    if (!workflow) return { namespace: ns };
    const limits: Limits = { namespace: ns, workflow: wf, groupDefault };
    if (group && group !== EVERY_GROUP) Object.assign(limits, { groupOverride: override, group: override ?? groupDefault });
    return limits;
  }

  /**
   * Counts per state and active/cap per level, read in one call without scanning runs.
   * @param opts.workflow one workflow (default: every workflow a worker registered)
   * @param opts.groups include per-group counts (costs one read per group with due or active runs)
   */
  async stats(opts: { workflow?: WorkflowRef; groups?: boolean } = {}): Promise<QueueStats> {
    const workflows = opts.workflow === undefined ? [] : [this.registry.resolve(opts.workflow).name];
    const reply = await this.scripts.get().run<unknown[]>('stats', [this.keys.leases, this.keys.limits], [this.keys.base, opts.groups ? 1 : 0, ...workflows]);
    return parseStats(reply, opts.groups === true);
  }

  /** The enqueue script; resolves true if the run is new, false if the id existed. `waited`: publish its outcome. */
  private async store(request: EnqueueRequest, waited = false): Promise<boolean> {
    const [created] = await this.scripts.get().run<[number, string]>('enqueue', this.enqueueKeys(request), this.enqueueArgs(request, waited));
    return created === 1;
  }

  private handle<T>(id: string, created: boolean): RunHandle<T> {
    return { id, created, result: (opts) => this.wait<T>(id, opts) };
  }

  private enqueueKeys(request: EnqueueRequest): string[] {
    const { keys } = this;
    return [keys.run(request.id), keys.leases, keys.limits, keys.seq];
  }

  private enqueueArgs(request: EnqueueRequest, waited = false): (string | number)[] {
    return [
      this.keys.base, request.id, request.workflow, request.input, request.priority, request.delayMs,
      request.runAtMs ?? '', request.attempts, request.group ?? '', this.options.fastPath ? 1 : 0, this.options.worker.lockMs,
      waited ? 1 : 0,
    ];
  }
}

function checkTimeout(timeoutMs: number): void {
  checkInteger(timeoutMs, 'opts.timeoutMs', 0, 2_147_483_647);
}
