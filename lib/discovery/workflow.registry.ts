import { Inject, Injectable } from '@nestjs/common';
import { UnknownWorkflowError } from '../errors';
import { RESOLVED_QUEUE_OPTIONS } from '../queue.constants';
import { ResolvedQueueOptions, resolveBackoff } from '../queue.options';
import type { BackoffOptions, WorkflowClass, WorkflowInstance, WorkflowOptions } from '../workflow/workflow.types';
import { WorkflowMetadataAccessor } from './workflow-metadata.accessor';
import type { DeclaredSchedule } from '../schedule/schedule.options';

/** A discovered workflow with its options resolved against the module defaults. */
export interface WorkflowDefinition {
  name: string;
  metatype: Function;
  instance: WorkflowInstance;
  concurrency?: number;
  groupConcurrency?: number;
  attempts: number;
  backoff: Required<BackoffOptions>;
  /** Schedules its `@Workflow` declares, ids filled in (checked at the decorator). */
  schedules: Array<DeclaredSchedule & { id: string }>;
}

/** The workflows of this application, by name. Filled by the explorer at module init. */
@Injectable()
export class WorkflowRegistry {
  private readonly byName = new Map<string, WorkflowDefinition>();

  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly accessor: WorkflowMetadataAccessor,
  ) {}

  add(name: string, options: WorkflowOptions, metatype: Function, instance: WorkflowInstance): void {
    this.byName.set(name, {
      name,
      metatype,
      instance,
      concurrency: options.concurrency,
      groupConcurrency: options.groupConcurrency,
      attempts: options.attempts ?? this.options.defaults.attempts,
      backoff: resolveBackoff(options.backoff, this.options.defaults.backoff, `@Workflow('${name}') backoff`),
      schedules: (options.schedules ?? []).map((schedule) => ({ ...schedule, id: schedule.id ?? name })),
    });
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  get(name: string): WorkflowDefinition {
    const definition = this.byName.get(name);
    if (!definition) throw new UnknownWorkflowError(name);
    return definition;
  }

  all(): WorkflowDefinition[] {
    return [...this.byName.values()];
  }

  /**
   * What enqueue needs to know of a workflow given by class or name. A decorated class that is
   * not a provider here is still accepted (another application may run it); a bare name must be
   * registered, because a typo would otherwise queue runs nobody ever takes.
   */
  resolve(workflow: WorkflowClass | string): { name: string; attempts: number } {
    if (typeof workflow === 'string') return this.get(workflow);
    const metadata = this.accessor.getWorkflow(workflow);
    if (!metadata) throw new UnknownWorkflowError(String((workflow as Function)?.name ?? workflow));
    return this.byName.get(metadata.name) ?? { name: metadata.name, attempts: metadata.options.attempts ?? this.options.defaults.attempts };
  }
}
