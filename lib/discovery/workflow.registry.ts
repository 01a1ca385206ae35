import { Inject, Injectable, type Type } from '@nestjs/common';
import { UnknownWorkflowError, WorkflowDefinitionError } from '../errors';
import { batchWorkflowName, type BatchOptions } from '../workflow/batch.options';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import { ResolvedQueueOptions, resolveBackoff } from '../interfaces/queue.options';
import type { BackoffOptions } from '../interfaces/backoff.options';
import type { RetentionByCount, WorkflowClass, WorkflowInstance, WorkflowOptions } from '../workflow/workflow.types';
import { isWorkflowContract, type WorkflowContract } from '../workflow/workflow.contract';
import { checkName } from '../util/names';
import type { RateLimit } from '../interfaces/rate-limit';
import { WorkflowMetadataAccessor } from './workflow-metadata.accessor';
import type { DeclaredSchedule } from '../interfaces/schedule.options';
import type { StandardSchemaV1 } from '../workflow/standard-schema';
import type { WorkflowDedupeOptions } from '../interfaces/dedupe.options';
import { filteringInstance } from '../workflow/trigger.filter';

/** What Nest declares a provider with: its class, or the factory function that makes it. */
export type ProviderMetatype = Type<unknown> | ((...args: never) => unknown);

/** A discovered workflow with its options resolved against the module defaults. */
export interface WorkflowDefinition {
  name: string;
  metatype: ProviderMetatype;
  instance: WorkflowInstance;
  /** What attempts call: `instance`, or with `@Workflow({ filter })` a view of it applying the filter (see filteringInstance). */
  entry: WorkflowInstance;
  /** Event names it is subscribed to (`@Workflow({ on })`, sorted), written to Redis at bootstrap; empty for none. */
  on: readonly string[];
  concurrency?: number;
  groupConcurrency?: number;
  /** Fleet-wide rate limits (`@Workflow({ rateLimit, groupRateLimit })`), written to Redis at bootstrap. */
  rateLimit?: RateLimit;
  groupRateLimit?: RateLimit;
  /** Retention by count (`@Workflow({ keep })`), written to Redis at bootstrap. */
  keep?: RetentionByCount;
  /** Whether its completed runs are indexed for `listRuns` (`indexCompleted`, or implied by `keep.completed`). */
  indexCompleted: boolean;
  attempts: number;
  backoff: Required<BackoffOptions>;
  /** Time limit of each attempt in ms (checked at the decorator); a run's own `runTimeoutMs` wins. */
  timeoutMs?: number;
  /** Schedules its `@Workflow` declares, ids filled in (checked at the decorator). */
  schedules: Array<DeclaredSchedule & { id: string }>;
  /** Its input schema (`@Workflow({ input })` or its contract's): the attempt validates the stored input with it. */
  input?: StandardSchemaV1;
  /** Its output schema: the attempt validates `run`'s result with it. */
  output?: StandardSchemaV1;
  /**
   * A batch workflow's (`@Workflow(name, { batch })`): its definition is registered under its
   * batch workflow's name (`name` above, `<of>.batch`), whose runs are the batches workers claim.
   */
  batch?: BatchTarget;
}

/** A batch workflow as enqueues and workers need it (see docs/batches.md). */
export interface BatchTarget {
  /** The workflow's own name: its members' workflow. */
  of: string;
  /** The batch workflow's name, `<of>.batch`: batch runs are queued, capped and counted there. */
  workflow: string;
  options: BatchOptions;
}

/** What enqueue and schedule need to know of a workflow given by class, contract or name. */
export interface ResolvedWorkflow {
  name: string;
  attempts: number;
  /**
   * `false` for a name or contract no `@Workflow` of this process declares: the caller must ask
   * Redis whether any worker of the fleet registered it (see `FleetWorkflows`) before writing.
   */
  known: boolean;
  /**
   * The input schema to validate with before writing, where this process knows one: the
   * contract's, else the `@Workflow`'s (declared here, or on the class given).
   */
  input?: StandardSchemaV1;
  /** The dedupe a `@Workflow` class declares: only for a workflow given by that class (see `WorkflowOptions.dedupe`). */
  dedupe?: WorkflowDedupeOptions;
  /** Set for a batch workflow: an enqueue stores a member of a batch (see docs/batches.md). */
  batch?: BatchTarget;
}

/** The workflows of this application, by name. Filled by the explorer at module init. */
@Injectable()
export class WorkflowRegistry {
  private readonly byName = new Map<string, WorkflowDefinition>();
  /** Batch workflows by their own name (`byName` holds them under their batch workflow's). */
  private readonly batches = new Map<string, WorkflowDefinition>();
  /** Registered classes as `resolve` answers for them: the same for the process's life, asked on every enqueue. */
  private readonly resolvedClasses = new WeakMap<object, ResolvedWorkflow>();

  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly accessor: WorkflowMetadataAccessor,
  ) {}

  add(name: string, options: WorkflowOptions, metatype: ProviderMetatype, instance: WorkflowInstance): void {
    const batch = options.batch && { of: name, workflow: batchWorkflowName(name), options: options.batch };
    const registered = batch ? batch.workflow : name;
    if (this.byName.has(registered))
      throw new WorkflowDefinitionError(`Duplicate workflow name "${registered}": it is also the batch workflow of @Workflow('${name}')`);
    const definition: WorkflowDefinition = {
      name: registered,
      metatype,
      instance,
      entry: options.filter ? filteringInstance(instance, options.filter) : instance,
      on: (options.on as readonly string[] | undefined) ?? [],
      concurrency: options.concurrency,
      groupConcurrency: options.groupConcurrency,
      rateLimit: options.rateLimit,
      groupRateLimit: options.groupRateLimit,
      keep: options.keep,
      indexCompleted: options.indexCompleted === true || options.keep?.completed !== undefined,
      attempts: options.attempts ?? this.options.defaults.attempts,
      backoff: resolveBackoff(options.backoff, this.options.defaults.backoff, `@Workflow('${name}') backoff`),
      timeoutMs: options.timeoutMs,
      schedules: (options.schedules ?? []).map((schedule) => ({ ...schedule, id: schedule.id ?? name })),
      ...(options.input && { input: options.input }),
      ...(options.output && { output: options.output }),
      ...(batch && { batch }),
    };
    this.byName.set(registered, definition);
    if (batch) this.batches.set(name, definition);
  }

  has(name: string): boolean {
    return this.byName.has(name) || this.batches.has(name);
  }

  get(name: string): WorkflowDefinition {
    const definition = this.byName.get(name) ?? this.batches.get(name);
    if (!definition) throw new UnknownWorkflowError(name);
    return definition;
  }

  all(): WorkflowDefinition[] {
    return [...this.byName.values()];
  }

  /**
   * What enqueue needs to know of a workflow given by class, contract or name, without I/O. A
   * decorated class that is not a provider here is accepted as known (another application may run
   * it). A name or contract this process does not declare comes back `known: false`, with the
   * contract's attempts or the module default: a typo would otherwise queue runs nobody ever
   * takes, so the caller checks the fleet's registrations before writing.
   * @throws UnknownWorkflowError for a class without `@Workflow` (or anything else that is not a workflow)
   * @throws InvalidNameError for a name that cannot be a workflow name
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any contract, whatever its input and output types
  resolve(workflow: WorkflowClass | WorkflowContract<any, any> | string): ResolvedWorkflow {
    if (typeof workflow === 'string' || isWorkflowContract(workflow)) {
      const name = typeof workflow === 'string' ? workflow : workflow.name;
      const local = this.byName.get(name) ?? this.batches.get(name);
      const input = (typeof workflow === 'string' ? undefined : workflow.input) ?? local?.input;
      if (local?.batch?.of === name) return { name, attempts: local.attempts, known: true, input, batch: local.batch };
      if (local) return { name, attempts: local.attempts, known: true, input };
      checkName(name, 'workflow');
      const attempts = typeof workflow === 'string' ? undefined : workflow.attempts;
      return { name, attempts: attempts ?? this.options.defaults.attempts, known: false, input };
    }
    const resolved = this.resolvedClasses.get(workflow);
    if (resolved) return resolved;
    const metadata = this.accessor.getWorkflow(workflow);
    const label: unknown = (workflow as { name?: string } | null)?.name ?? workflow; // a JS caller may pass anything
    if (!metadata) throw new UnknownWorkflowError(String(label));
    const local = this.byName.get(metadata.name) ?? this.batches.get(metadata.name);
    const batch = metadata.options.batch;
    const answer: ResolvedWorkflow = {
      name: metadata.name,
      attempts: local?.attempts ?? metadata.options.attempts ?? this.options.defaults.attempts,
      known: true,
      input: metadata.options.input,
      ...(metadata.options.dedupe && { dedupe: metadata.options.dedupe }),
      ...(batch && { batch: { of: metadata.name, workflow: batchWorkflowName(metadata.name), options: batch } }),
    };
    if (local) this.resolvedClasses.set(workflow, answer);
    return answer;
  }
}
