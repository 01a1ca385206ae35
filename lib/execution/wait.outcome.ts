import { ChildWorkflowFailedError, type RunErrorInfo } from '../errors';
import { decodeMessage } from '../redis/payload.codec';
import type { Stored } from '../workflow/payload.types';
import type { WaitOutcome } from '../workflow/wait.types';

/**
 * A wait's outcome as the scripts write it to the memo (see lua/includes/waits.lua): a payload
 * (`p`, or `u` for undefined), the end of its time (`t`), or a child that did not complete (`s`, `e`).
 */
interface Envelope {
  p?: unknown;
  u?: 1;
  t?: 1;
  s?: 'failed' | 'cancelled';
  e?: RunErrorInfo | null;
  x?: number;
}

/**
 * An outcome as it may enter the memo under `key` within `room` bytes: the envelope, or the
 * refusal marker `{"x":<bytes>}`; and the room left. The worker's copy of fitOutcome in
 * lua/includes/waits.lua, for the testing harness (which writes the memo itself).
 */
export function fitOutcome(key: string, envelope: string, room: number): [string, number] {
  const bytes = Buffer.byteLength(key) + Buffer.byteLength(envelope);
  if (bytes > room) return [`{"x":${bytes}}`, room];
  return [envelope, room - bytes];
}

/** The bytes of an outcome the memo's budget refused (`{"x":<bytes>}`), or undefined. */
export function refusedBytes(raw: string): number | undefined {
  if (!raw.startsWith('{"x":')) return undefined;
  return open(raw).x;
}

function open(raw: string): Envelope {
  return decodeMessage<Envelope | undefined>(raw, 'p') ?? {};
}

/** A signal or event wait's outcome. */
export function toWaitOutcome<T>(raw: string): WaitOutcome<T> {
  const envelope = open(raw);
  if (envelope.t === 1) return { timedOut: true };
  return { timedOut: false, payload: envelope.p as Stored<T> };
}

/** A child's outcome: its result, or the `ChildWorkflowFailedError` the parent sees. */
export function toChildOutcome<T>(
  childId: string,
  raw: string,
): { ok: true; result: Stored<T> } | { ok: false; error: ChildWorkflowFailedError } {
  const envelope = open(raw);
  if (envelope.s) return { ok: false, error: new ChildWorkflowFailedError(childId, envelope.s, envelope.e ?? null) };
  return { ok: true, result: envelope.p as Stored<T> };
}
