import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';
import { newNonce, type EnqueueSettings } from './enqueue.command';
import { EVENT_BATCH } from './send-event.command';

/** One publish (lua/publish.lua), checked by the caller. */
export interface PublishRequest {
  name: string;
  id: string;
  /** The encoded payload ('' = undefined). */
  payload: string;
  /** The key of the waits it resumes ('' for none). */
  key: string;
  /** How long the event's record is kept (the idempotency window), ms. */
  keepMs: number;
}

/** lua/publish.lua's reply. */
export interface PublishReply {
  /** Whether this call published the event (false: the id was published before; nothing was written). */
  published: boolean;
  /** The name the id was published under (another name than the request's: a conflict). */
  name: string;
  resumed: number;
  /** Waiting runs left in the index (the caller resumes them with send-event). */
  left: number;
  runs: Array<{ workflow: string; runId: string; created: boolean }>;
}

/**
 * Publishes one event in one script call. Sent again after a lost reply with the same nonce: a
 * retry that finds the record its first try wrote answers as that try did.
 */
export async function publishEvent(
  scripts: LuaScripts,
  keys: RedisKeys,
  settings: EnqueueSettings,
  request: PublishRequest,
): Promise<PublishReply> {
  const flags = `${settings.fastPath ? 1 : 0}${settings.compact ? 1 : 0}`;
  const args = [
    keys.base,
    request.name,
    request.id,
    request.payload,
    request.key,
    flags,
    settings.lockMs,
    newNonce(),
    request.keepMs,
    EVENT_BATCH,
  ];
  const reply = await scripts.run<(string | number)[]>('publish', [keys.published(request.id)], args, { idempotent: true });
  const runs: PublishReply['runs'] = [];
  for (let i = 4; i < reply.length; i += 3)
    runs.push({ workflow: String(reply[i]), runId: String(reply[i + 1]), created: reply[i + 2] === 1 });
  return { published: reply[0] === 1, name: String(reply[1]), resumed: Number(reply[2]), left: Number(reply[3]), runs };
}
