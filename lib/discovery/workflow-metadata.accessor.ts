import { Injectable } from '@nestjs/common';
import { STEP_METADATA, WORKFLOW_METADATA } from '../interfaces/queue.constants';
import type { WorkflowMetadata } from '../decorators/workflow.decorator';

/** The one place that knows where the decorators keep their metadata. */
@Injectable()
export class WorkflowMetadataAccessor {
  getWorkflow(target: unknown): WorkflowMetadata | undefined {
    return isClass(target) ? Reflect.getMetadata(WORKFLOW_METADATA, target) : undefined;
  }

  getSteps(target: unknown): string[] {
    return isClass(target) ? Reflect.getMetadata(STEP_METADATA, target) ?? [] : [];
  }
}

function isClass(target: unknown): target is object {
  return typeof target === 'function';
}
