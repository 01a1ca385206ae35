import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { WorkflowDefinitionError } from '../errors';
import type { WorkflowInstance } from '../workflow/workflow.types';
import { WorkflowMetadataAccessor } from './workflow-metadata.accessor';
import { type ProviderMetatype, WorkflowRegistry } from './workflow.registry';

/**
 * Finds the `@Workflow` providers at module init (see SluiceServices.onModuleInit) and fills the
 * registry. Pure metadata work, no I/O: a declaration mistake fails the bootstrap here with a
 * message naming the class.
 */
export class WorkflowExplorer {
  constructor(
    private readonly accessor: WorkflowMetadataAccessor,
    private readonly registry: WorkflowRegistry,
  ) {}

  /** @param wrappers the app's providers and controllers (DiscoveryService's) */
  explore(wrappers: readonly InstanceWrapper[]): void {
    const seen = new Map<string, string>();
    for (const wrapper of wrappers) {
      const metatype = wrapper.metatype as ProviderMetatype | undefined;
      if (!metatype || !wrapper.instance) continue;
      const metadata = this.accessor.getWorkflow(metatype);
      const steps = this.accessor.getSteps(metatype);
      if (!metadata) {
        if (steps.length) {
          throw new WorkflowDefinitionError(
            `${metatype.name} has @Step methods (${steps.join(', ')}) but no @Workflow decorator; steps only exist inside a workflow`,
          );
        }
        continue;
      }
      if (this.registry.has(metadata.name) && this.registry.get(metadata.name).instance === wrapper.instance) continue;
      this.checkDefinition(wrapper, metatype, metadata.name, steps, seen);
      seen.set(metadata.name, metatype.name);
      this.registry.add(metadata.name, metadata.options, metatype, wrapper.instance as WorkflowInstance);
    }
    this.checkScheduleIds();
  }

  /** A schedule id is unique per namespace: two workflows of one app must not declare the same. */
  private checkScheduleIds(): void {
    const owners = new Map<string, string>();
    for (const workflow of this.registry.all()) {
      for (const { id } of workflow.schedules) {
        const owner = owners.get(id);
        if (owner)
          throw new WorkflowDefinitionError(
            `Schedule id "${id}" is declared by both @Workflow('${owner}') and @Workflow('${workflow.name}'); schedule ids are unique per namespace`,
          );
        owners.set(id, workflow.name);
      }
    }
  }

  private checkDefinition(
    wrapper: InstanceWrapper,
    metatype: ProviderMetatype,
    name: string,
    steps: string[],
    seen: Map<string, string>,
  ): void {
    const owner = seen.get(name);
    if (owner) throw new WorkflowDefinitionError(`Duplicate workflow name "${name}": declared by ${owner} and ${metatype.name}`);
    if (!wrapper.isDependencyTreeStatic()) {
      throw new WorkflowDefinitionError(
        `@Workflow('${name}') ${metatype.name} must be a singleton provider (request- or transient-scoped dependencies are not supported)`,
      );
    }
    if (typeof (wrapper.instance as { run?: unknown }).run !== 'function') {
      throw new WorkflowDefinitionError(`@Workflow('${name}') ${metatype.name} has no run(input, ctx) method`);
    }
    const duplicateStep = steps.find((step, index) => steps.indexOf(step) !== index);
    if (duplicateStep) throw new WorkflowDefinitionError(`@Workflow('${name}') ${metatype.name} declares step "${duplicateStep}" twice`);
  }
}
