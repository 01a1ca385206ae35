import { InvalidOptionError } from '../errors';
import type { BatchTarget } from '../discovery/workflow.registry';
import type { EnqueueOptions } from '../interfaces/enqueue.options';
import type { BatchEnqueueCall } from '../redis/commands/enqueue-batch.command';
import { batchKeyOf } from '../workflow/batch.options';
import { buildEnqueueRequest } from '../workflow/enqueue.request';
import { newRunId } from '../workflow/run-id';

/**
 * Enqueue options a batch member cannot have: it starts, and is retried, with its batch (see
 * docs/batches.md). `group` is the batch key when the workflow has no `batch.key`.
 */
const BATCH_REFUSED = ['delayMs', 'delay', 'runAt', 'priority', 'attempts', 'runTimeoutMs'] as const;

/**
 * Checks one member enqueue of a batch workflow before any Redis call (as buildEnqueueRequest
 * does for any enqueue, plus the options a member cannot have and its batch key).
 */
export function batchMemberCall(
  batch: BatchTarget,
  workflow: { name: string; attempts: number },
  input: unknown,
  opts: EnqueueOptions | undefined,
  maxPayloadBytes: number,
  allowed?: readonly string[],
): Omit<BatchEnqueueCall, 'waited'> {
  const request = buildEnqueueRequest(workflow, input, opts, maxPayloadBytes, allowed);
  // A member's window would decide nothing its batch does not: it joins the open batch anyway.
  if (opts?.dedupe !== undefined && opts.dedupe !== false)
    throw new InvalidOptionError('opts.dedupe', `a member of batch workflow "${batch.of}" joins its open batch: it takes no dedupe`);
  for (const option of BATCH_REFUSED) {
    if (opts?.[option] !== undefined)
      throw new InvalidOptionError(`opts.${option}`, `a member of batch workflow "${batch.of}" starts and retries with its batch`);
  }
  return { request, batch, key: batchKeyOf(batch.options, input, request.group), batchId: newRunId() };
}
