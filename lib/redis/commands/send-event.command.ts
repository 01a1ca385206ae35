import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';
import { eventTarget } from '../run.layout';

/** Runs one send-event call resumes at most: one short script call however many runs wait. */
export const EVENT_BATCH = 500;

/** One event (lua/send-event.lua), checked by the caller. */
export interface EventRequest {
  name: string;
  /** The key the runs wait on ('' for none). */
  key: string;
  /** The encoded payload ('' = undefined). */
  payload: string;
}

/** What one send-event call did. */
export interface EventBatch {
  /** Runs this call resumed. */
  resumed: number;
  /** Runs still waiting on the name and key (0: none). */
  left: number;
}

/**
 * Resumes at most {@link EVENT_BATCH} of the runs waiting on the event's name and key. A call
 * that lands takes its runs out of the index, so a repeat after a lost reply resumes no run twice.
 */
export async function sendEventBatch(scripts: LuaScripts, keys: RedisKeys, request: EventRequest): Promise<EventBatch> {
  const [resumed, left] = await scripts.run<[number, number]>(
    'send-event',
    [keys.limits, keys.seq],
    [keys.base, eventTarget(request.name, request.key), request.payload, EVENT_BATCH],
    { idempotent: true },
  );
  return { resumed, left };
}
