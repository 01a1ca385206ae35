import { Injectable } from '@nestjs/common';
import { WORKFLOW_EVENT_METADATA, type WorkflowEventHandlerMetadata } from '../decorators/on-workflow-event.decorator';

/** The one place that knows where `@OnWorkflowEvent` keeps its metadata. */
@Injectable()
export class WorkflowEventAccessor {
  /** The handlers declared on `prototype[method]` (inherited declarations included). */
  getHandlers(prototype: object, method: string): WorkflowEventHandlerMetadata[] {
    return (Reflect.getMetadata(WORKFLOW_EVENT_METADATA, prototype, method) as WorkflowEventHandlerMetadata[] | undefined) ?? [];
  }
}
