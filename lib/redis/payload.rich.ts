import { types } from 'node:util';

/**
 * The values JSON has no faithful form for that Sluice stores anyway ("rich" values), and how.
 * In a payload each one is written as a JSON stand-in (its `form` below) plus a note naming its
 * kind and path; the decoder rebuilds it from the stand-in (see payload.codec.ts for the format).
 *
 * A plain-JSON payload has no note and is written exactly as before this module existed, so older
 * versions still read it and it costs nothing more; only a payload holding one of these values
 * takes the rich form.
 */
export type RichKind = 'Date' | 'Map' | 'Set' | 'BigInt' | 'undefined' | 'number' | 'URL' | 'RegExp' | 'bytes';

/** Typed arrays a payload keeps, by constructor name (`Buffer` decodes as a Buffer). */
const TYPED_ARRAYS: Record<string, (bytes: Buffer) => ArrayBufferView> = {
  Buffer: (bytes) => Buffer.from(bytes),
  Uint8Array: (bytes) => new Uint8Array(aligned(bytes, 1)),
  Uint8ClampedArray: (bytes) => new Uint8ClampedArray(aligned(bytes, 1)),
  Int8Array: (bytes) => new Int8Array(aligned(bytes, 1)),
  Uint16Array: (bytes) => new Uint16Array(aligned(bytes, 2)),
  Int16Array: (bytes) => new Int16Array(aligned(bytes, 2)),
  Uint32Array: (bytes) => new Uint32Array(aligned(bytes, 4)),
  Int32Array: (bytes) => new Int32Array(aligned(bytes, 4)),
  Float32Array: (bytes) => new Float32Array(aligned(bytes, 4)),
  Float64Array: (bytes) => new Float64Array(aligned(bytes, 8)),
  BigInt64Array: (bytes) => new BigInt64Array(aligned(bytes, 8)),
  BigUint64Array: (bytes) => new BigUint64Array(aligned(bytes, 8)),
};

/** A fresh ArrayBuffer holding `bytes` (a view needs its own, aligned buffer), or a throw if the length cannot be whole elements. */
function aligned(bytes: Buffer, elementSize: number): ArrayBuffer {
  if (bytes.length % elementSize !== 0) throw new Error(`${bytes.length} bytes are not whole ${elementSize}-byte elements`);
  const buffer = new ArrayBuffer(bytes.length);
  new Uint8Array(buffer).set(bytes);
  return buffer;
}

/**
 * The rich kind of a non-plain object (its prototype is not `Object.prototype`, and it is not an
 * array), or `undefined`. Brand checks (internal slots, @@toStringTag) rather than `instanceof`,
 * so values from another realm (vm, Jest) are recognised too.
 */
export function richObjectKind(object: object): RichKind | undefined {
  if (types.isDate(object)) return 'Date';
  if (ArrayBuffer.isView(object)) return types.isDataView(object) || !(typeName(object) in TYPED_ARRAYS) ? undefined : 'bytes';
  if (types.isMap(object)) return 'Map';
  if (types.isSet(object)) return 'Set';
  if (types.isRegExp(object)) return 'RegExp';
  if (Object.prototype.toString.call(object) === '[object URL]' && typeof (object as URL).href === 'string') return 'URL';
  return undefined;
}

/** The rich kind of a primitive JSON cannot keep (inside a container, for `undefined`), or `undefined`. */
export function richPrimitiveKind(value: unknown): RichKind | undefined {
  // JSON writes -0 as 0.
  if (typeof value === 'number') return Number.isFinite(value) && (value !== 0 || 1 / value > 0) ? undefined : 'number';
  if (typeof value === 'bigint') return 'BigInt';
  return value === undefined ? 'undefined' : undefined;
}

/**
 * A rich value's JSON stand-in, before its children are checked: Map and Set give arrays (of
 * `[key, value]` pairs, of members) whose items the walk then checks and converts in turn.
 */
export function richForm(kind: RichKind, value: unknown): unknown {
  switch (kind) {
    case 'Date': {
      const time = (value as Date).getTime();
      return Number.isNaN(time) ? null : (value as Date).toISOString();
    }
    case 'Map':
      return Array.from(value as Map<unknown, unknown>, ([key, item]) => [key, item]);
    case 'Set':
      return Array.from(value as Set<unknown>);
    case 'BigInt':
    case 'number':
      return Object.is(value, -0) ? '-0' : String(value);
    case 'undefined':
      return null;
    case 'URL':
      return (value as URL).href;
    case 'RegExp':
      return [(value as RegExp).source, (value as RegExp).flags];
    case 'bytes': {
      const view = value as ArrayBufferView;
      return [typeName(view), Buffer.from(view.buffer, view.byteOffset, view.byteLength).toString('base64')];
    }
  }
}

/**
 * Rebuilds a rich value from its stand-in (whose own rich children are already rebuilt).
 * @throws Error if the stand-in is not what {@link richForm} writes for `kind`
 */
export function reviveRich(kind: unknown, form: unknown): unknown {
  switch (kind) {
    case 'Date':
      if (form === null) return new Date(Number.NaN);
      return new Date(expect(form, 'string', kind));
    case 'Map':
      return new Map(pairs(form));
    case 'Set':
      if (!Array.isArray(form)) throw new Error('a Set is not an array of members');
      return new Set(form);
    case 'BigInt':
      return BigInt(expect(form, 'string', kind));
    case 'number': {
      if (form === '-0') return -0;
      const number = Number(expect(form, 'string', kind));
      if (Number.isFinite(number) || (Number.isNaN(number) && form !== 'NaN'))
        throw new Error(`${String(form)} is not NaN, ±Infinity or -0`);
      return number;
    }
    case 'undefined':
      return undefined;
    case 'URL':
      return new URL(expect(form, 'string', kind));
    case 'RegExp': {
      const [source, flags] = tuple(form, kind);
      return new RegExp(expect(source, 'string', kind), expect(flags, 'string', kind));
    }
    case 'bytes': {
      const [name, base64] = tuple(form, kind);
      const make = typeof name === 'string' && Object.hasOwn(TYPED_ARRAYS, name) ? TYPED_ARRAYS[name] : undefined;
      if (!make) throw new Error(`${String(name)} is not a typed array`);
      return make(Buffer.from(expect(base64, 'string', kind), 'base64'));
    }
    default:
      throw new Error(`unknown kind ${String(kind)}`);
  }
}

function expect(value: unknown, type: 'string', kind: string): string {
  if (typeof value !== type) throw new Error(`a ${kind} is not stored as a ${type}`);
  return value as string;
}

function tuple(form: unknown, kind: string): [unknown, unknown] {
  if (!Array.isArray(form) || form.length !== 2) throw new Error(`a ${kind} is not a pair`);
  return form as [unknown, unknown];
}

function pairs(form: unknown): [unknown, unknown][] {
  if (!Array.isArray(form) || !form.every((entry) => Array.isArray(entry) && entry.length === 2))
    throw new Error('a Map is not an array of [key, value] pairs');
  return form as [unknown, unknown][];
}

/** The name of an object's class, for messages and the typed-array lookup ('object' when it has none). */
export function typeName(object: object): string {
  const name: unknown = (object as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' ? name : 'object';
}
