import { Injectable } from '@nestjs/common';
import { WORKFLOW_METADATA } from '../queue.constants';
import { checkName } from '../util/names';
import { checkInteger } from '../util/duration';
import type { WorkflowOptions } from '../workflow/workflow.types';

/** What `@Workflow` records on its class. */
export interface WorkflowMetadata {
  name: string;
  options: WorkflowOptions;
}

/**
 * Declares a workflow: a Nest provider (with the usual constructor injection) whose
 * `run(input, ctx)` is executed by Sluice workers. List the class in a module's `providers`.
 *
 * @param name unique per namespace; letters, digits, `.`, `_`, `-`. Stored with every run, so
 *   renaming a workflow strands its queued runs.
 */
export function Workflow(name: string, options: WorkflowOptions = {}): ClassDecorator {
  checkName(name, '@Workflow name');
  if (options.concurrency !== undefined) checkInteger(options.concurrency, `@Workflow('${name}') concurrency`, 1, 1_000_000);
  if (options.attempts !== undefined) checkInteger(options.attempts, `@Workflow('${name}') attempts`, 1, 1_000);
  const metadata: WorkflowMetadata = { name, options };
  return (target) => {
    Reflect.defineMetadata(WORKFLOW_METADATA, metadata, target);
    Injectable()(target);
  };
}
