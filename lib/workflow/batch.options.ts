import { InvalidInputError, InvalidOptionError } from '../errors';
import { checkInteger } from '../util/duration';
import { checkName, MAX_NAME_LENGTH } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';

/**
 * `@Workflow(name, { batch })`: the workflow's runs are members of batches, and its `run` gets
 * the inputs of a whole batch at once (see docs/batches.md). `In` is one member's input.
 */
export interface BatchOptions<In = unknown> {
  /** Most members a batch holds (1 to 1,000): the member that fills it makes it start at once. */
  maxSize: number;
  /**
   * Longest a batch waits for more members, in ms from its first member's enqueue (0 to one
   * day): then it starts with the members it has.
   */
  maxWaitMs: number;
  /**
   * Batches form per key: members whose key differs never share a batch. A function of one
   * member's input returning a name (letters, digits, `.`, `_`, `-`), called by the producer
   * before any Redis call. Without it, the enqueue's `group` is the key; without either, the
   * workflow has one batch open at a time. The key is the batch run's group, so
   * `groupConcurrency` caps the batches running per key.
   */
  key?(input: In): string;
}

/** The keys of {@link BatchOptions}. */
export const BATCH_OPTIONS: readonly string[] = ['maxSize', 'maxWaitMs', 'key'];

export const MAX_BATCH_SIZE = 1_000;
export const MAX_BATCH_WAIT_MS = 86_400_000;

/** What batch runs of workflow `name` are queued, capped and counted as: a workflow of their own. */
export const BATCH_SUFFIX = '.batch';

export function batchWorkflowName(name: string): string {
  return `${name}${BATCH_SUFFIX}`;
}

/**
 * The `batch` option, checked at the decorator: every value, and the options a batch workflow
 * cannot have (each member's input and result are payloads of their own, and a schedule would
 * enqueue runs no batch takes).
 */
export function checkBatchOptions(name: string, batch: unknown, others: Record<string, unknown>): BatchOptions {
  const field = `@Workflow('${name}') batch`;
  if (batch === null || typeof batch !== 'object' || Array.isArray(batch))
    throw new InvalidOptionError(field, 'must be an object { maxSize, maxWaitMs, key? }');
  checkOptionKeys(batch, BATCH_OPTIONS, field);
  const options = batch as BatchOptions;
  checkInteger(options.maxSize, `${field}.maxSize`, 1, MAX_BATCH_SIZE);
  checkInteger(options.maxWaitMs, `${field}.maxWaitMs`, 0, MAX_BATCH_WAIT_MS);
  if (options.key !== undefined && typeof options.key !== 'function')
    throw new InvalidOptionError(`${field}.key`, `must be a function of one member's input, got ${typeof options.key}`);
  if (name.length + BATCH_SUFFIX.length > MAX_NAME_LENGTH)
    throw new InvalidOptionError(field, `needs a workflow name of at most ${MAX_NAME_LENGTH - BATCH_SUFFIX.length} characters`);
  // `on`/`filter`: publish starts plain runs, which a batch workflow's workers never claim;
  // `dedupe`: a member joins its open batch whatever a window would say.
  for (const other of ['schedules', 'input', 'output', 'dedupe', 'on', 'filter'])
    if (others[other] !== undefined)
      throw new InvalidOptionError(`@Workflow('${name}') ${other}`, 'cannot be combined with batch (docs/batches.md)');
  return options;
}

/** A member's batch key (see {@link BatchOptions.key}), checked before any Redis call. */
export function batchKeyOf(batch: BatchOptions, input: unknown, group: string | undefined): string {
  if (!batch.key) return group ?? '';
  let key: unknown;
  try {
    key = batch.key(input);
  } catch (error) {
    throw new InvalidOptionError('batch.key', `threw for this input: ${(error as Error)?.message ?? String(error)}`, { cause: error });
  }
  return checkName(key, 'batch.key(input)');
}

/**
 * Refuses a batch workflow where only plain runs can go (a schedule's fires, `ctx.invoke`'s child):
 * such a run would be queued under the workflow's own name, which no worker of a batch workflow
 * claims (docs/batches.md).
 */
export function refuseBatchTarget(target: { name: string; batch?: unknown }, field: string): void {
  if (target.batch !== undefined)
    throw new InvalidInputError(field, `"${target.name}" is a batch workflow: enqueue its members with enqueue or run (docs/batches.md)`);
}
