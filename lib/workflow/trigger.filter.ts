import type { RunContext, WorkflowInstance } from './workflow.types';
import { isTriggerRun } from './trigger.options';

/** The step a run refused by its workflow's `filter` records: what its timeline shows. */
export const FILTER_STEP = 'event-filter';

/**
 * What a worker's attempts call for a workflow with `@Workflow({ filter })`: the instance, whose
 * `run` first asks the filter about a run an event started (its id says so, see isTriggerRun).
 * A refused run records the step {@link FILTER_STEP} (its value `false`, which rides along with
 * the completion) and ends with result `undefined` without calling `run`. Asked at every
 * attempt (it is a pure function of the payload), after the input schema. Runs enqueued directly
 * are not filtered. Made once per workflow at discovery; a workflow without a filter is called
 * as it is, paying nothing.
 */
export function filteringInstance(instance: WorkflowInstance, filter: (payload: unknown) => boolean): WorkflowInstance {
  const filtered = Object.create(instance) as WorkflowInstance;
  filtered.run = async (input: unknown, ctx: RunContext) => {
    if (!isTriggerRun(ctx.runId) || filter(input)) return instance.run(input, ctx) as unknown;
    await ctx.step(FILTER_STEP, () => false);
    return undefined;
  };
  return filtered;
}
