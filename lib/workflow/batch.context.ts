import { InvalidInputError } from '../errors';
import type { BatchContext, BatchInfo, RunContext } from './workflow.types';

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
