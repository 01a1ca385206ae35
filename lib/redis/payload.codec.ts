import { PayloadTooLargeError } from '../errors';
import { jsonSafe } from './payload.check';

export { MAX_PAYLOAD_DEPTH } from './payload.check';

/** Encodes `undefined` (a valid step or run result), which has no JSON text of its own. */
const UNDEFINED = '';

/**
 * Encodes a value as JSON after checking JSON can round-trip it: anything JSON would drop or
 * silently change (functions, symbols, BigInt, NaN/Infinity, Map/Set, RegExp, Error, typed arrays,
 * Promise, cycles, `undefined` or holes in arrays, nesting deeper than {@link MAX_PAYLOAD_DEPTH}) is
 * a {@link PayloadNotSerializableError} naming the path, rather than a surprise on replay.
 * Objects with `toJSON` (e.g. `Date`) are encoded through it, as `JSON.stringify` does, and what it
 * returns is checked the same way.
 */
export function encodePayload(value: unknown, field: string, maxBytes: number): string {
  const text = value === undefined ? UNDEFINED : JSON.stringify(jsonSafe(value, field));
  // A UTF-16 unit is at most 3 bytes of UTF-8: a text this short fits without being measured.
  if (text.length * 3 <= maxBytes) return text;
  const bytes = Buffer.byteLength(text);
  if (bytes > maxBytes) throw new PayloadTooLargeError(field, bytes, maxBytes);
  return text;
}

/**
 * Decodes what {@link encodePayload} wrote. `__proto__` keys are dropped so that a payload can
 * never reach `Object.prototype`, even if user code later merges it into another object.
 */
export function decodePayload<T = unknown>(text: string | null | undefined): T {
  if (text === null || text === undefined || text === UNDEFINED) return undefined as T;
  // A key can only decode to "__proto__" if the text spells it out or escapes a character (\u):
  // other texts parse without the reviver, which makes JSON.parse several times slower.
  if (!text.includes('__proto__') && !text.includes('\\u')) return JSON.parse(text) as T;
  // The reviver makes JSON.parse recurse (a few thousand levels overflow Node 20's default stack):
  // MAX_PAYLOAD_DEPTH keeps what encodePayload writes far below that.
  return JSON.parse(text, dropProtoKeys) as T;
}

function dropProtoKeys(key: string, value: unknown): unknown {
  return key === '__proto__' ? undefined : value;
}
