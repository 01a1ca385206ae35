import { Injectable } from '@nestjs/common';
import {
  WORKFLOW_EVENT_METADATA,
  WORKFLOW_EVENT_PROTOTYPES,
  type WorkflowEventHandlerMetadata,
} from '../decorators/on-workflow-event.decorator';

/** The one place that knows where `@OnWorkflowEvent` keeps its metadata. */
@Injectable()
export class WorkflowEventAccessor {
  /** Whether a method of `prototype` or of a prototype it inherits from has `@OnWorkflowEvent`. */
  declaresHandlers(prototype: object): boolean {
    for (let p: object | null = prototype; p && p !== Object.prototype; p = Object.getPrototypeOf(p) as object | null) {
      if (WORKFLOW_EVENT_PROTOTYPES.has(p)) return true;
    }
    return false;
  }

  /** The handlers declared on `prototype[method]` (inherited declarations included). */
  getHandlers(prototype: object, method: string): WorkflowEventHandlerMetadata[] {
    return (Reflect.getMetadata(WORKFLOW_EVENT_METADATA, prototype, method) as WorkflowEventHandlerMetadata[] | undefined) ?? [];
  }
}
