import type { EnqueueRequest } from '../../interfaces/enqueue.options';
import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';
import { firstTryOnly, newNonce, type EnqueueReply } from './enqueue.command';

/** One member enqueue of a batch workflow (lua/enqueue-batch.lua). */
export interface BatchEnqueueCall {
  request: EnqueueRequest;
  batch: {
    /** The workflow's name (its members'). */
    of: string;
    /** Its batch workflow's, `<of>.batch`. */
    workflow: string;
    options: { maxSize: number; maxWaitMs: number };
  };
  /** Id of the batch run this enqueue opens, if it opens one (a new generated run id). */
  batchId: string;
  /** The member's batch key ('' for none), checked already (see batchKeyOf). */
  key: string;
  /** Who waits on the member (run()): '1' for its done channel, or an inbox id; '' for nobody. */
  waited: string;
}

/** lua/enqueue-batch.lua's reply: an enqueue's, with the batch the member joined (a new member only). */
export interface BatchEnqueueReply extends EnqueueReply {
  batchId?: string;
}

/**
 * Stores a member and adds it to its key's open batch, in one script call. Sent again after a lost
 * reply with the same nonce (and the same id for a batch it would open), so a retry that finds
 * the member its first try created still answers `created`.
 */
export async function enqueueBatchMember(scripts: LuaScripts, keys: RedisKeys, call: BatchEnqueueCall): Promise<BatchEnqueueReply> {
  const { request, batch } = call;
  const generated = request.idGenerated === true;
  const nonce = generated ? '' : newNonce();
  const firstTry = firstTryOnly(generated);
  const reply = await scripts.run<string>(
    'enqueue-batch',
    [keys.run(request.id)],
    () => [
      keys.base,
      request.id,
      batch.of,
      request.input,
      batch.workflow,
      call.key,
      batch.options.maxSize,
      batch.options.maxWaitMs,
      request.attempts,
      call.batchId,
      call.waited,
      nonce,
      firstTry() ? '0' : '1',
    ],
    { idempotent: true },
  );
  const space = reply.indexOf(' ');
  const created = reply[0] === '+' || generated;
  if (space < 0) return { created, state: reply.slice(1) };
  return { created, state: reply.slice(1, space), ...(space + 1 < reply.length && { batchId: reply.slice(space + 1) }) };
}
