import { NonRetryableError } from './run.errors';

/**
 * A batch workflow's `run` (see docs/batches.md) returned something other than an array with one
 * result per input, in the inputs' order: the batch fails for good, and each of its members with it.
 */
export class BatchOutputError extends NonRetryableError {
  constructor(
    /** The batch workflow's name. */
    readonly workflow: string,
    detail: string,
  ) {
    super(`Batch workflow "${workflow}": run must return an array with one result per input, in their order; ${detail}`);
  }
}
