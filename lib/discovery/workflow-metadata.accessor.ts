import { Injectable } from '@nestjs/common';
import { STEP_METADATA, WORKFLOW_METADATA } from '../interfaces/queue.constants';
import type { WorkflowMetadata } from '../decorators/workflow.decorator';

/** The one place that knows where the decorators keep their metadata. */
@Injectable()
export class WorkflowMetadataAccessor {
  getWorkflow(target: unknown): WorkflowMetadata | undefined {
    return isClass(target) ? (Reflect.getMetadata(WORKFLOW_METADATA, target) as WorkflowMetadata | undefined) : undefined;
  }

  getSteps(target: unknown): string[] {
    return isClass(target) ? ((Reflect.getMetadata(STEP_METADATA, target) as string[] | undefined) ?? []) : [];
  }
}

function isClass(target: unknown): target is object {
  return typeof target === 'function';
}
