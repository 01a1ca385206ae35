import { Logger } from '@nestjs/common';
import { MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { WorkflowDefinitionError } from '../errors';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import type { RunEventName } from '../interfaces/run.events';
import { RunEvents } from './run.events';
import { WorkflowEventAccessor } from '../discovery/workflow-event.accessor';
import { WorkflowRegistry } from '../discovery/workflow.registry';

interface Registered {
  label: string;
  event: RunEventName;
  workflows?: readonly string[];
}

/**
 * Finds the `@OnWorkflowEvent` methods of every provider at module init (see
 * SluiceServices.onModuleInit) — before any `onApplicationBootstrap`, so before the worker starts
 * and emits — and adds each as a
 * {@link RunEvents} listener, filtered by workflow name when it asks to be. The same pattern as
 * `@Workflow`: decorator → metadata accessor → explorer.
 */
export class WorkflowEventExplorer {
  private readonly logger = new Logger('Sluice');
  private readonly registered: Registered[] = [];

  constructor(
    private readonly scanner: MetadataScanner,
    private readonly accessor: WorkflowEventAccessor,
    private readonly events: RunEvents,
    private readonly registry: WorkflowRegistry,
    private readonly options: ResolvedQueueOptions,
  ) {}

  /** @param wrappers the app's providers and controllers (DiscoveryService's): controllers too, or a handler on one would be silently ignored */
  explore(wrappers: readonly InstanceWrapper[]): void {
    const seen = new Set<object>();
    for (const wrapper of wrappers) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || typeof instance !== 'object' || seen.has(instance)) continue;
      seen.add(instance);
      const prototype = Object.getPrototypeOf(instance) as object | null;
      if (!prototype || prototype === Object.prototype || !this.accessor.declaresHandlers(prototype)) continue;
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const handlers = this.accessor.getHandlers(prototype, method);
        if (handlers.length === 0) continue;
        const label = `${instance.constructor?.name ?? 'provider'}.${method}`;
        // A request-scoped or transient provider has no one instance to call: say so rather than
        // call a placeholder or pick one instance silently.
        if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
          throw new WorkflowDefinitionError(
            `@OnWorkflowEvent on ${label}: the provider must be a singleton (request- or transient-scoped providers are not supported)`,
          );
        }
        for (const { event, workflows } of handlers) this.add(instance, method, label, event, workflows);
      }
    }
  }

  /**
   * A filter naming a workflow this app does not run never fires (events come from this
   * process's worker only): most likely a typo, so say so once the registry is complete.
   */
  checkFilters(): void {
    if (!this.options.worker.enabled) return;
    for (const { label, event, workflows } of this.registered) {
      const unknown = (workflows ?? []).filter((name) => !this.registry.has(name));
      if (unknown.length) {
        this.logger.warn(
          `@OnWorkflowEvent('${event}') on ${label} filters on ${unknown.map((name) => `"${name}"`).join(', ')}, which this app's worker does not run: it only hears this process's runs`,
        );
      }
    }
  }

  private add(instance: Record<string, unknown>, method: string, label: string, event: RunEventName, workflows?: readonly string[]): void {
    const handler = instance[method] as (payload: unknown) => unknown;
    const only = workflows && new Set(workflows);
    const listener = (payload: { workflow: string }) => (only && !only.has(payload.workflow) ? undefined : handler.call(instance, payload));
    // RunEvents logs a throw or rejection naming the label, and goes on with the other listeners.
    this.events.onLabelled(event, listener, label);
    this.registered.push({ label, event, workflows });
  }
}
