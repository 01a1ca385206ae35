import { PayloadNotSerializableError, PayloadTooLargeError } from '../errors';

/** Default bound on any encoded payload (input, step result, run result). */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;

/** Encodes `undefined` (a valid step or run result), which has no JSON text of its own. */
const UNDEFINED = '';

/**
 * Encodes a value as JSON after checking JSON can round-trip it: anything JSON would drop or
 * silently change (functions, symbols, BigInt, NaN/Infinity, Map/Set, cycles, `undefined` in
 * arrays) is a {@link PayloadNotSerializableError} naming the path, rather than a surprise on replay.
 * Objects with `toJSON` (e.g. `Date`) are encoded through it, as `JSON.stringify` does.
 */
export function encodePayload(value: unknown, field: string, maxBytes: number): string {
  assertJsonSafe(value, field, new Set());
  const text = value === undefined ? UNDEFINED : JSON.stringify(value);
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
  return JSON.parse(text, dropProtoKeys) as T;
}

function dropProtoKeys(key: string, value: unknown): unknown {
  return key === '__proto__' ? undefined : value;
}

function assertJsonSafe(value: unknown, path: string, ancestors: Set<object>): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
    case 'undefined':
      return;
    case 'number':
      if (!Number.isFinite(value)) fail(path, `${value} has no JSON form`);
      return;
    case 'bigint':
      return fail(path, 'BigInt has no JSON form (convert it to a string)');
    case 'function':
    case 'symbol':
      return fail(path, `a ${typeof value} cannot be serialized`);
  }
  if (value === null) return;
  const object = value as object;
  if (typeof (object as { toJSON?: unknown }).toJSON === 'function') return;
  if (object instanceof Map || object instanceof Set || object instanceof WeakMap || object instanceof WeakSet) {
    fail(path, `a ${object.constructor.name} would serialize as {} (convert it to an array or object)`);
  }
  if (ancestors.has(object)) fail(path, 'circular reference');
  ancestors.add(object);
  if (Array.isArray(object)) {
    object.forEach((item, index) => {
      if (item === undefined) fail(`${path}[${index}]`, 'undefined in an array would become null');
      assertJsonSafe(item, `${path}[${index}]`, ancestors);
    });
  } else {
    for (const key of Object.keys(object)) assertJsonSafe((object as Record<string, unknown>)[key], `${path}.${key}`, ancestors);
  }
  ancestors.delete(object);
}

function fail(path: string, reason: string): never {
  throw new PayloadNotSerializableError(path, reason);
}
