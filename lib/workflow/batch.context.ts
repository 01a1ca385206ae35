import { InvalidInputError } from '../errors';
import type { RunContext } from './workflow.types';

/** The batch a batch workflow's `run` is called with (see {@link BatchContext}). */
export interface BatchInfo {
  /** The batch run's id (also `ctx.runId`). */
  readonly id: string;
  /** The member run ids, in the order of the inputs. */
  readonly memberIds: readonly string[];
}

/**
 * The `ctx` of a batch workflow's `run(inputs, ctx)` (`@Workflow(name, { batch })`, see
 * docs/batches.md): a run context of the batch run — steps are memoized per batch, waits suspend
 * the whole batch — with the batch's members. Typing `ctx` as `BatchContext` is also what tells
 * the compiler that the class batches: `client.run(Class, input)` then takes one member's input
 * and resolves with that member's result. `continueAsNew` is refused (a batch's inputs are its
 * members'): it fails the batch without retries.
 */
export interface BatchContext<In = unknown> extends RunContext<In> {
  readonly batch: BatchInfo;
}

/** `ctx` for a batch's `run`: the attempt's own, plus `batch`, with `continueAsNew` refused. */
export function batchContext(ctx: RunContext, batch: BatchInfo): BatchContext {
  const refused = () =>
    Promise.reject(new InvalidInputError('ctx.continueAsNew', 'is not available in a batch workflow (docs/batches.md)'));
  return new Proxy(ctx, {
    get: (target, property) => {
      if (property === 'batch') return batch;
      if (property === 'continueAsNew') return refused;
      return Reflect.get(target, property, target) as unknown;
    },
  }) as BatchContext;
}
