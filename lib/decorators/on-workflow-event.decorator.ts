import { InvalidOptionError } from '../errors';
import { checkName } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';
import { RUN_EVENT_NAMES, type RunEventName, type RunEventPayload } from '../interfaces/run.events';

/** Where `@OnWorkflowEvent` records its handlers: on the class prototype, per method. */
export const WORKFLOW_EVENT_METADATA = 'sluice:workflow-events';

/**
 * The prototypes `@OnWorkflowEvent` decorated a method of: the explorer looks for handlers only
 * on providers with one of these in their prototype chain, instead of reading the metadata of
 * every method of every provider at each bootstrap.
 */
export const WORKFLOW_EVENT_PROTOTYPES = new WeakSet<object>();

/** Options of {@link OnWorkflowEvent}. */
export interface OnWorkflowEventOptions {
  /**
   * Only events of this workflow (or any of these), by `@Workflow` name. Default: every workflow
   * this process's worker runs.
   */
  workflow?: string | readonly string[];
}

/** What `@OnWorkflowEvent` records for one handler. */
export interface WorkflowEventHandlerMetadata {
  event: RunEventName;
  /** Workflow names the handler is limited to; undefined: all. */
  workflows?: readonly string[];
}

/**
 * Makes a method of any provider a listener of this process's worker events, like
 * `RunEvents.on` but declared: the provider is found at module init and its handlers are added
 * before the worker starts. The method gets the event's payload (see `RunEventMap`):
 *
 * ```ts
 * @Injectable()
 * export class RunMetrics {
 *   @OnWorkflowEvent('failed', { workflow: 'order.fulfil' })
 *   onFailed(event: RunFailedEvent) {
 *     if (!event.willRetry) this.alerts.raise(event.runId, event.error.message);
 *   }
 * }
 * ```
 *
 * A handler runs synchronously on the worker's path (an async one is not awaited): keep it cheap.
 * One that throws or rejects is logged as a warning naming it; the run and the other handlers are
 * unaffected. The provider must be a singleton (a request- or transient-scoped one fails the
 * bootstrap with `WorkflowDefinitionError`). A method may carry several `@OnWorkflowEvent`s.
 *
 * @param event `'active'`, `'completed'`, `'failed'`, `'retrying'`, `'stalled'` or `'suspended'`
 */
export function OnWorkflowEvent<E extends RunEventName>(event: E, options: OnWorkflowEventOptions = {}) {
  if (!RUN_EVENT_NAMES.includes(event)) {
    throw new InvalidOptionError(
      '@OnWorkflowEvent event',
      `must be one of ${RUN_EVENT_NAMES.map((name) => `'${name}'`).join(', ')}, got ${JSON.stringify(event)}`,
    );
  }
  if (options === null || typeof options !== 'object')
    throw new InvalidOptionError('@OnWorkflowEvent options', 'must be an object { workflow? }');
  checkOptionKeys(options, ['workflow'], '@OnWorkflowEvent options');
  const metadata: WorkflowEventHandlerMetadata = {
    event,
    ...(options.workflow !== undefined && { workflows: checkWorkflows(options.workflow) }),
  };
  // The method's type is checked against the event's payload: a handler of 'completed' cannot
  // declare a parameter the payload does not satisfy.
  return <T extends (payload: RunEventPayload<E>) => unknown>(
    target: object,
    propertyKey: string | symbol,
    descriptor: TypedPropertyDescriptor<T>,
  ): void => {
    if (typeof descriptor?.value !== 'function')
      throw new TypeError(`@OnWorkflowEvent() must decorate a method, not ${String(propertyKey)}`);
    // A static method has no provider instance to be called on: it would be silently ignored.
    if (typeof target === 'function')
      throw new TypeError(`@OnWorkflowEvent() must decorate an instance method, not the static ${target.name}.${String(propertyKey)}`);
    // On (prototype, key) rather than on the function: a decorator that wraps the method (applied
    // before or after this one) would otherwise lose the metadata.
    const handlers =
      (Reflect.getOwnMetadata(WORKFLOW_EVENT_METADATA, target, propertyKey) as WorkflowEventHandlerMetadata[] | undefined) ?? [];
    Reflect.defineMetadata(WORKFLOW_EVENT_METADATA, [...handlers, metadata], target, propertyKey);
    WORKFLOW_EVENT_PROTOTYPES.add(target);
  };
}

function checkWorkflows(workflow: string | readonly string[]): string[] {
  const names = typeof workflow === 'string' ? [workflow] : workflow;
  if (!Array.isArray(names) || names.length === 0) {
    throw new InvalidOptionError('@OnWorkflowEvent options.workflow', 'must be a workflow name or a non-empty array of names');
  }
  return names.map((name, i) => checkName(name, `@OnWorkflowEvent options.workflow${typeof workflow === 'string' ? '' : `[${i}]`}`));
}
