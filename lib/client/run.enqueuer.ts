import { Inject, Injectable } from '@nestjs/common';
import { InvalidInputError, InvalidOptionError, OutcomeUnknownError } from '../errors';
import type { DedupeRequest, WorkflowDedupeOptions } from '../interfaces/dedupe.options';
import { CLIENT_ENQUEUE_OPTIONS, type EnqueueOptions, type EnqueueRequest } from '../interfaces/enqueue.options';
import type { LocalWorker } from '../interfaces/local.worker';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { enqueueRun, type EnqueueReply, type EnqueueSettings } from '../redis/commands/enqueue.command';
import { enqueueChunk, enqueueMany } from '../redis/commands/enqueue-many.command';
import { enqueueDeduped, type DedupeReply } from '../redis/commands/enqueue-dedupe.command';
import { enqueueBatchMember, type BatchEnqueueCall, type BatchEnqueueReply } from '../redis/commands/enqueue-batch.command';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisKeys } from '../redis/redis.keys';
import { telemetryApi, type OtelApi } from '../telemetry/otel.loader';
import { captureTrace } from '../telemetry/trace.carrier';
import { buildEnqueueRequest } from '../workflow/enqueue.request';
import { checkOptionKeys } from '../util/option-keys';
import { NamespaceLayout } from '../migration/namespace.layout';
import { EnqueueBatcher } from './enqueue.batcher';
import { batchMemberCall } from './batch.member';
import type { BatchTarget } from '../discovery/workflow.registry';

/**
 * Stores enqueued runs (lua/enqueue.lua, lua/enqueue-many.lua) for `QueueClient`: one by one,
 * coalesced while others are in flight (see EnqueueBatcher), or many in one round trip.
 */
@Injectable()
export class RunEnqueuer {
  /** Set only with telemetry on: enqueues then store the caller's trace context with the run. */
  private readonly otel: OtelApi | undefined;
  /** The enqueue scripts' settings (publish starts its runs as an enqueue would). */
  readonly settings: EnqueueSettings;
  private readonly batcher: EnqueueBatcher;

  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly scripts: LuaScriptsProvider,
    private readonly keys: RedisKeys,
    layout: NamespaceLayout,
    /** This process's worker, if it has one: runs handed to it start from the enqueue's reply (see LocalWorker). */
    private readonly localWorker?: LocalWorker,
  ) {
    this.otel = telemetryApi(options);
    this.settings = new LayoutAwareSettings(options, layout);
    this.batcher = new EnqueueBatcher({
      one: (request) => this.storeOne(request).then((reply) => reply.created),
      chunk: (workflow, chunk) => this.storeChunk(workflow, chunk),
    });
  }

  /**
   * Stores one run; resolves true if it is new, false if the id existed. Concurrent calls share
   * script calls (see EnqueueBatcher), unless there is a trace context to store with the run.
   */
  store(request: EnqueueRequest): Promise<boolean> {
    const trace = this.otel && captureTrace(this.otel);
    if (trace !== undefined) return this.storeOne(request, '', trace).then((reply) => reply.created);
    return this.batcher.store(request);
  }

  /**
   * Stores one run that `waitedBy` waits on (run()): its outcome is to be published, on its done
   * channel ('1') or that inbox (see finishRun in lua/includes/finish.lua). Never batched.
   */
  storeWaited(request: EnqueueRequest, waitedBy: string): Promise<EnqueueReply> {
    return this.storeOne(request, waitedBy, this.otel && captureTrace(this.otel));
  }

  /**
   * Stores one run with a dedupe (lua/enqueue-dedupe.lua), never batched: the window decides
   * which run the call names. A lost reply past the retries is an `OutcomeUnknownError` without a
   * run id (the window may have named another run): enqueuing again with the key is safe.
   */
  async storeDeduped(request: EnqueueRequest, dedupe: DedupeRequest): Promise<DedupeReply> {
    const { localWorker } = this;
    const call = { request, dedupe, trace: this.otel && captureTrace(this.otel), selfWorkerId: localWorker?.workerId };
    const reply = await enqueueDeduped(this.scripts.get(), this.keys, this.settings, call);
    const { handoff } = reply;
    // Handed to this process's worker: Redis published nothing, this reply is the only copy.
    if (handoff && handoff.workerId === localWorker?.workerId)
      localWorker.handoff(request.workflow, handoff.token, reply.runId, request.input);
    return reply;
  }

  /**
   * Stores one member of a batch workflow and adds it to its open batch (lua/enqueue-batch.lua);
   * `call.waited` as for {@link storeWaited} ('' for nobody).
   */
  async storeMember(call: BatchEnqueueCall): Promise<BatchEnqueueReply> {
    try {
      return await enqueueBatchMember(this.scripts.get(), this.keys, call);
    } catch (error) {
      if (error instanceof OutcomeUnknownError) error.runId = call.request.id;
      throw error;
    }
  }

  /**
   * Checks every item of an `enqueueMany` before any Redis call: one bad item throws (its error
   * names the item's index) and nothing is written. A dedupe is refused (the item's, or the one
   * the workflow declares unless the item says `dedupe: false`): each needs its window's answer.
   */
  requests(
    workflow: { name: string; attempts: number; dedupe?: WorkflowDedupeOptions },
    items: Array<{ input: unknown; opts?: EnqueueOptions }>,
  ): EnqueueRequest[] {
    return eachItem(items, (input, opts) => {
      const request = buildEnqueueRequest(workflow, input, opts, this.options.maxPayloadBytes, CLIENT_ENQUEUE_OPTIONS);
      const dedupe = opts?.dedupe;
      if (dedupe !== undefined && dedupe !== false)
        throw new InvalidOptionError('opts.dedupe', 'is not taken by enqueueMany: enqueue runs with a dedupe one by one, with enqueue()');
      if (workflow.dedupe && dedupe === undefined)
        throw new InvalidOptionError(
          'opts.dedupe',
          `@Workflow('${workflow.name}') declares a dedupe, which enqueueMany does not apply: use enqueue(), or pass dedupe: false`,
        );
      return request;
    });
  }

  /**
   * `enqueueMany` of a batch workflow: every item checked first as {@link requests} does (nothing
   * written if one is bad), then one enqueue-batch call per member, sent together.
   */
  async storeMembers(
    batch: BatchTarget,
    workflow: { name: string; attempts: number },
    items: Array<{ input: unknown; opts?: EnqueueOptions }>,
  ): Promise<Array<{ id: string; created: boolean }>> {
    const calls = eachItem(items, (input, opts) =>
      batchMemberCall(batch, workflow, input, opts, this.options.maxPayloadBytes, CLIENT_ENQUEUE_OPTIONS),
    );
    const replies = await Promise.all(calls.map((call) => this.storeMember({ ...call, waited: '' })));
    return calls.map((call, index) => ({ id: call.request.id, created: replies[index].created }));
  }

  /** Stores one workflow's runs in one round trip (a pipeline of enqueue-many calls); resolves per run as {@link store}. */
  async storeMany(workflow: string, requests: EnqueueRequest[]): Promise<boolean[]> {
    const trace = this.otel && captureTrace(this.otel); // one context for the whole batch
    return enqueueMany(this.scripts.get(), this.keys, this.settings, { workflow, runs: requests, trace });
  }

  /** The enqueue script for one run; `waited`: see {@link storeWaited} ('' for nobody). */
  private async storeOne(request: EnqueueRequest, waited = '', trace?: string): Promise<EnqueueReply> {
    try {
      const { localWorker } = this;
      const call = { request, waited, trace, selfWorkerId: localWorker?.workerId };
      const reply = await enqueueRun(this.scripts.get(), this.keys, this.settings, call);
      const { handoff } = reply;
      // Handed to this process's worker: Redis published nothing, this reply is the only copy.
      if (handoff && handoff.workerId === localWorker?.workerId)
        localWorker.handoff(request.workflow, handoff.token, request.id, request.input);
      return reply;
    } catch (error) {
      if (error instanceof OutcomeUnknownError) error.runId = request.id;
      throw error;
    }
  }

  /** The enqueue-many script for one chunk of one workflow's runs; resolves per run as {@link storeOne}. */
  private storeChunk(workflow: string, chunk: EnqueueRequest[]): Promise<boolean[]> {
    return enqueueChunk(this.scripts.get(), this.keys, this.settings, { workflow, runs: chunk });
  }
}

/** The enqueue scripts' settings; `compact` follows the layout the bootstrap found (see NamespaceLayout). */
class LayoutAwareSettings implements EnqueueSettings {
  readonly fastPath: boolean;
  readonly lockMs: number;

  constructor(
    private readonly options: ResolvedQueueOptions,
    private readonly layout: NamespaceLayout,
  ) {
    this.fastPath = options.fastPath;
    this.lockMs = options.worker.lockMs;
  }

  get compact(): boolean {
    return this.options.compactRunRecords || this.layout.leanRecords;
  }
}

/** Builds each `enqueueMany` item with `build`; a bad item's error names its index (`items[3].opts.priority`). */
function eachItem<T>(items: Array<{ input: unknown; opts?: EnqueueOptions }>, build: (input: unknown, opts?: EnqueueOptions) => T): T[] {
  return items.map((item, index) => {
    if (item === null || typeof item !== 'object') throw new InvalidInputError(`items[${index}]`, 'must be an object { input, opts? }');
    checkOptionKeys(item, ['input', 'opts'], `items[${index}]`);
    try {
      return build(item.input, item.opts);
    } catch (error) {
      if (error instanceof InvalidInputError) (error as { message: string }).message = `items[${index}].${error.message}`;
      throw error;
    }
  });
}
