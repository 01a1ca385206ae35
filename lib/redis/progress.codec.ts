import { PayloadNotSerializableError, PayloadTooLargeError } from '../errors';
import { decodeMessage, encodePayload } from './payload.codec';

/**
 * Largest encoded `ctx.progress` value (or `maxPayloadBytes`, if that is smaller). Progress is
 * sent to every waiter that asked for it, up to four times a second: it is meant for a
 * percentage or a short status, not for data (return that, or memoize it in a step).
 */
export const MAX_PROGRESS_BYTES = 16 * 1024;

/**
 * Encodes a progress value as every other payload is encoded (the same checks
 * and typed errors), within {@link MAX_PROGRESS_BYTES}. `undefined` is refused: stored as
 * nothing, it would read back as "no progress reported".
 * @throws PayloadNotSerializableError, PayloadTooLargeError
 */
export function encodeProgress(value: unknown, maxPayloadBytes: number): string {
  if (value === undefined) throw new PayloadNotSerializableError('progress', 'undefined has no JSON form (pass null instead)');
  const limit = Math.min(MAX_PROGRESS_BYTES, maxPayloadBytes);
  // Bounded here rather than by encodePayload, whose error would name maxPayloadBytes.
  const encoded = encodePayload(value, 'progress', Number.POSITIVE_INFINITY);
  const bytes = Buffer.byteLength(encoded);
  if (bytes > limit)
    throw new PayloadTooLargeError('progress', bytes, limit, limit === MAX_PROGRESS_BYTES ? 'MAX_PROGRESS_BYTES' : 'maxPayloadBytes');
  return encoded;
}

/** What lua/progress.lua publishes on a run's progress channel. */
export interface ProgressMessage {
  v: 1;
  seq: number;
  value: unknown;
}

/** Reads a message of a progress channel; `undefined` for anything else. */
export function parseProgressMessage(message: string): ProgressMessage | undefined {
  try {
    const record = decodeMessage<ProgressMessage>(message, 'value');
    return record && typeof record === 'object' && record.v === 1 && typeof record.seq === 'number' ? record : undefined;
  } catch {
    return undefined;
  }
}
