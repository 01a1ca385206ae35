import { InvalidInputError, PayloadNotSerializableError, PayloadTooLargeError } from '../../lib';
import fc from 'fast-check';
import { decodePayload, encodePayload, MAX_PAYLOAD_DEPTH } from '../../lib/redis/payload.codec';
import { DEFAULT_MAX_PAYLOAD_BYTES } from '../../lib/interfaces/payload.limits';

const LIMIT = DEFAULT_MAX_PAYLOAD_BYTES;

function encodeError(value: unknown, field = 'input'): Error {
  try {
    encodePayload(value, field, LIMIT);
  } catch (error) {
    return error as Error;
  }
  throw new Error('encodePayload did not throw');
}

/** Checks the error is the typed one, naming `path` as its field and in its message. */
function expectNotSerializable(error: Error, path: string, reason?: RegExp): void {
  expect(error).toBeInstanceOf(PayloadNotSerializableError);
  expect((error as PayloadNotSerializableError).field).toBe(path);
  expect(error.message).toContain(`${path}: `);
  if (reason) expect(error.message).toMatch(reason);
}

/** `levels` arrays nested inside each other around 1. */
/**
 * What `value` decodes as: boxed primitives come back unboxed, class instances and prototype-less
 * objects as plain objects of their own data (`toEqual` does not compare prototypes).
 */
function comparable(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (value instanceof Number || value instanceof String || value instanceof Boolean) return value.valueOf();
  if (Array.isArray(value)) return value.map(comparable);
  if (value instanceof Map) return new Map([...value].map(([k, v]) => [comparable(k), comparable(v)]));
  if (value instanceof Set) return new Set([...value].map(comparable));
  if (value instanceof Date || ArrayBuffer.isView(value)) return value;
  // Decoding drops `__proto__` keys by design (see decodePayload): fast-check generates them.
  return Object.fromEntries(
    Object.entries(value)
      .filter(([k]) => k !== '__proto__')
      .map(([k, v]) => [k, comparable(v)]),
  );
}

function nestedArrays(levels: number): unknown {
  let value: unknown = 1;
  for (let level = 0; level < levels; level++) value = [value];
  return value;
}

describe('encodePayload', () => {
  it('round-trips plain JSON values', () => {
    const value = { a: 1, b: 'two', c: [true, null, { d: -1.5 }], e: {} };
    expect(decodePayload(encodePayload(value, 'input', LIMIT))).toEqual(value);
    expect(decodePayload(encodePayload('text', 'input', LIMIT))).toBe('text');
    expect(decodePayload(encodePayload(0, 'input', LIMIT))).toBe(0);
    expect(decodePayload(encodePayload(null, 'input', LIMIT))).toBeNull();
  });

  it('round-trips undefined', () => {
    const encoded = encodePayload(undefined, 'input', LIMIT);
    expect(typeof encoded).toBe('string');
    expect(decodePayload(encoded)).toBeUndefined();
  });

  it.each([
    ['a function', { x: { fn: () => 1 } }, 'input.x.fn'],
    ['a symbol', { s: Symbol('s') }, 'input.s'],
    ['a function in a Map', { m: new Map([[1, () => 1]]) }, 'input.m[0][1]'],
    ['a symbol in a Set', { s: new Set([Symbol('s')]) }, 'input.s[0]'],
  ])('rejects %s with PayloadNotSerializableError naming the path', (_label, value, path) => {
    const error = encodeError(value);
    expect(error).toBeInstanceOf(PayloadNotSerializableError);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect(error.message).toContain(path);
    expect((error as PayloadNotSerializableError).field).toBe(path);
  });

  it('rejects top-level non-serializable values', () => {
    expect(encodeError(() => 1)).toBeInstanceOf(PayloadNotSerializableError);
    expect(encodeError(Symbol('s'))).toBeInstanceOf(PayloadNotSerializableError);
    expect(encodeError(new WeakMap())).toBeInstanceOf(PayloadNotSerializableError);
  });

  it('rejects a circular reference with its path', () => {
    const value: Record<string, unknown> = { inner: {} };
    (value.inner as Record<string, unknown>).back = value;
    const error = encodeError(value);
    expect(error).toBeInstanceOf(PayloadNotSerializableError);
    expect(error.message).toContain('input.inner.back');
    expect(error.message).toMatch(/circular/);
  });

  it('accepts a shared (non-circular) reference', () => {
    const shared = { k: 1 };
    expect(decodePayload(encodePayload({ a: shared, b: shared }, 'input', LIMIT))).toEqual({ a: { k: 1 }, b: { k: 1 } });
  });

  it('uses the field name given by the caller', () => {
    expect(encodeError({ f: () => 1 }, 'step "x#1" result').message).toContain('step "x#1" result.f');
  });

  it('keeps a Date a Date (no longer its toJSON() string)', () => {
    const date = new Date('2024-01-02T03:04:05.678Z');
    const decoded = decodePayload<{ at: Date }>(encodePayload({ at: date }, 'input', LIMIT));
    expect(decoded.at).toBeInstanceOf(Date);
    expect(decoded.at.toISOString()).toBe('2024-01-02T03:04:05.678Z');
  });

  it('throws PayloadTooLargeError above the limit and accepts exactly the limit', () => {
    const text = 'x'.repeat(98); // encodes as 100 bytes with the quotes
    expect(encodePayload(text, 'input', 100)).toHaveLength(100);
    let error: unknown;
    try {
      encodePayload(text + 'y', 'input', 100);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PayloadTooLargeError);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect((error as PayloadTooLargeError).bytes).toBe(101);
    expect((error as PayloadTooLargeError).limit).toBe(100);
    expect((error as Error).message).toContain('input');
  });

  it('counts bytes, not characters', () => {
    // 'é' is two bytes in UTF-8: 50 of them plus quotes is 102 bytes but 52 characters.
    expect(() => encodePayload('é'.repeat(50), 'input', 100)).toThrow(PayloadTooLargeError);
  });

  describe('toJSON()', () => {
    it.each([
      ['at the top level', { toJSON: () => undefined }, 'input'],
      ['in an object', { a: { toJSON: () => undefined } }, 'input.a'],
      ['in an array', { list: [{ toJSON: () => undefined }] }, 'input.list[0]'],
    ])('rejects toJSON() returning undefined %s', (_label, value, path) => {
      expectNotSerializable(encodeError(value), path, /toJSON\(\) returned undefined/);
    });

    it.each([
      ['a BigInt', () => BigInt(1), 'input.x', /toJSON\(\) returned .*BigInt/],
      ['NaN', () => NaN, 'input.x', /toJSON\(\) returned .*NaN/],
      ['a symbol', () => Symbol('s'), 'input.x', /toJSON\(\) returned .*symbol/],
      ['a function', () => () => 1, 'input.x', /toJSON\(\) returned .*function/],
      ['an object holding a function', () => ({ ok: 1, fn: () => 1 }), 'input.x.fn', /function/],
      ['an object holding a function', () => ({ list: [() => 1] }), 'input.x.list[0]', /function/],
      ['a Date, whose own toJSON() JSON.stringify would not call', () => new Date(0), 'input.x', /toJSON\(\) of its own/],
    ])('rejects toJSON() returning %s', (_label, toJSON, path, reason) => {
      expectNotSerializable(encodeError({ x: { toJSON } }), path, reason);
    });

    it('turns an error thrown by toJSON() into PayloadNotSerializableError, keeping it as the cause', () => {
      const thrown = new Error('boom');
      const error = encodeError({
        items: [
          {
            toJSON() {
              throw thrown;
            },
          },
        ],
      });
      expectNotSerializable(error, 'input.items[0]', /toJSON\(\) threw: boom/);
      expect(error.cause).toBe(thrown);
    });

    it('calls toJSON() once per value, with the key JSON.stringify passes, and writes what it returned', () => {
      const keys: string[] = [];
      let calls = 0;
      const counter = {
        toJSON(key: string) {
          keys.push(key);
          return { call: ++calls };
        },
      };
      expect(encodePayload(counter, 'input', LIMIT)).toBe('{"call":1}');
      expect(encodePayload({ p: counter, list: [counter, counter] }, 'input', LIMIT)).toBe(
        '{"p":{"call":2},"list":[{"call":3},{"call":4}]}',
      );
      expect(keys).toEqual(['', 'p', '0', '1']);
    });

    it('leaves the value it was given untouched', () => {
      const value = { at: new Date(0), list: [1, new Date(0)], m: new Map([[1, new Date(0)]]) };
      encodePayload(value, 'input', LIMIT);
      expect(value.at).toBeInstanceOf(Date);
      expect(value.list[1]).toBeInstanceOf(Date);
      expect(value.m.get(1)).toBeInstanceOf(Date);
    });

    it('keeps a Buffer a Buffer rather than calling its toJSON()', () => {
      const decoded = decodePayload<{ bytes: Buffer }>(encodePayload({ bytes: Buffer.from([1, 2]) }, 'input', LIMIT));
      expect(Buffer.isBuffer(decoded.bytes)).toBe(true);
      expect([...decoded.bytes]).toEqual([1, 2]);
    });

    it('accepts toJSON() returning this, and checks its own properties', () => {
      class Self {
        constructor(readonly value: unknown) {}
        toJSON(): this {
          return this;
        }
      }
      expect(encodePayload({ s: new Self(1) }, 'input', LIMIT)).toBe('{"s":{"value":1}}');
      expect(decodePayload(encodePayload({ s: new Self(new Date(0)) }, 'input', LIMIT))).toEqual({ s: { value: new Date(0) } });
      expectNotSerializable(encodeError({ s: new Self(() => 1) }), 'input.s.value', /function/);
    });
  });

  describe('depth', () => {
    it(`accepts ${MAX_PAYLOAD_DEPTH} nested levels and decodes them back`, () => {
      const value = nestedArrays(MAX_PAYLOAD_DEPTH);
      expect(decodePayload(encodePayload(value, 'input', LIMIT))).toEqual(value);
    });

    it('rejects one level more, naming the path of the level too many', () => {
      const error = encodeError(nestedArrays(MAX_PAYLOAD_DEPTH + 1));
      expectNotSerializable(error, 'input' + '[0]'.repeat(MAX_PAYLOAD_DEPTH), new RegExp(`more than ${MAX_PAYLOAD_DEPTH} levels`));
    });

    it('rejects a very deep value with PayloadNotSerializableError rather than a stack overflow', () => {
      let value: Record<string, unknown> = {};
      for (let level = 0; level < 100_000; level++) value = { a: value };
      const error = encodeError(value);
      expect(error).toBeInstanceOf(PayloadNotSerializableError);
      expect(error.message).toMatch(/levels deep/);
    });

    it('rejects a toJSON() whose result holds its own object again (endless nesting)', () => {
      const endless: { toJSON?: () => unknown } = {};
      endless.toJSON = () => ({ again: endless });
      const error = encodeError({ endless });
      expect(error).toBeInstanceOf(PayloadNotSerializableError);
      expect(error.message).toMatch(/levels deep/);
    });
  });

  it.each([
    // eslint-disable-next-line no-sparse-arrays
    ['a hole in a sparse array', { list: [1, , 3] }, 'input.list[1]', /hole/],
    ['an array made with new Array(n)', { list: new Array(2) }, 'input.list[0]', /hole/],
    ['an Error', { error: new Error('x') }, 'input.error', /\{ name, message \}/],
    ['an Error subclass with own properties', { error: Object.assign(new TypeError('x'), { code: 'E' }) }, 'input.error', /Error/],
    ['a typed array of a subclass', { bytes: new (class Bytes extends Uint8Array {})(1) }, 'input.bytes', /class Bytes/],
    ['a DataView', { view: new DataView(new ArrayBuffer(1)) }, 'input.view', /DataView/],
    ['an ArrayBuffer', { buffer: new ArrayBuffer(1) }, 'input.buffer', /ArrayBuffer/],
    ['a Promise', { pending: Promise.resolve(1) }, 'input.pending', /Promise.*await/],
    ['a WeakRef', { ref: new WeakRef({}) }, 'input.ref', /WeakRef/],
    ['a WeakMap', { m: new WeakMap() }, 'input.m', /WeakMap/],
    ['a WeakSet', { s: new WeakSet() }, 'input.s', /WeakSet/],
    ['a Number object holding NaN', { n: new Number(NaN) }, 'input.n', /NaN/],
    ['a BigInt object', { n: Object(BigInt(1)) }, 'input.n', /BigInt/],
    ['a Symbol object', { s: Object(Symbol('s')) }, 'input.s', /Symbol/],
  ])('rejects %s, which JSON would silently change', (_label, value, path, reason) => {
    expectNotSerializable(encodeError(value), path, reason);
  });

  it('rejects those at the top level too', () => {
    expectNotSerializable(encodeError(new Error('x')), 'input', /Error/);
    expectNotSerializable(encodeError(new DataView(new ArrayBuffer(1))), 'input', /DataView/);
  });

  it('keeps plain objects, prototype-less objects, boxed strings and class instances with own properties', () => {
    class Line {
      constructor(
        readonly sku: string,
        readonly qty: number,
      ) {}
    }
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { a: 1 });
    const value = { line: new Line('a', 2), bare, label: new String('x'), flag: new Boolean(false) };
    expect(encodePayload(value, 'input', LIMIT)).toBe('{"line":{"sku":"a","qty":2},"bare":{"a":1},"label":"x","flag":false}');
  });

  it('keeps an own __proto__ key as a key when it copies an object around a toJSON() result', () => {
    const value = JSON.parse('{"__proto__":{"x":1},"at":null}') as Record<string, unknown>;
    value.at = { toJSON: () => 'then' };
    expect(encodePayload(value, 'input', LIMIT)).toBe(JSON.stringify(value));
    value.at = new Date(0);
    expect(encodePayload(value, 'input', LIMIT)).toBe(`~rich1~[${JSON.stringify(value)},[["Date","at"]]]`);
  });

  it('writes what JSON.stringify writes for any value JSON keeps exactly (as every earlier version did)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        // JSON.parse gives the value as it comes back: -0 is written (and kept by older versions) as 0.
        const plain: unknown = JSON.parse(JSON.stringify(value));
        expect(encodePayload(plain, 'input', LIMIT)).toBe(JSON.stringify(plain));
      }),
      { numRuns: 500 },
    );
  });

  it('round-trips any value, or throws PayloadNotSerializableError', () => {
    const anything = fc.anything({
      withBigInt: true,
      withBoxedValues: true,
      withDate: true,
      withMap: true,
      withSet: true,
      withNullPrototype: true,
      withObjectString: true,
      withSparseArray: true,
      withTypedArray: true,
    });
    fc.assert(
      fc.property(anything, (value) => {
        let encoded: string;
        try {
          encoded = encodePayload(value, 'input', LIMIT);
        } catch (error) {
          expect(error).toBeInstanceOf(PayloadNotSerializableError);
          return;
        }
        expect(decodePayload(encoded)).toEqual(comparable(value));
      }),
      { numRuns: 500 },
    );
  });
});

describe('decodePayload', () => {
  afterEach(() => {
    delete (Object.prototype as Record<string, unknown>).polluted;
  });

  it('returns undefined for null, undefined and the empty encoding', () => {
    expect(decodePayload(null)).toBeUndefined();
    expect(decodePayload(undefined)).toBeUndefined();
    expect(decodePayload('')).toBeUndefined();
  });

  it('does not let a __proto__ key reach Object.prototype', () => {
    const decoded = decodePayload<Record<string, unknown>>('{"__proto__":{"polluted":1},"ok":2}');
    expect(decoded.ok).toBe(2);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype.hasOwnProperty.call(decoded, '__proto__')).toBe(false);
    expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype);
    expect(decoded.polluted).toBeUndefined();

    const merged: Record<string, unknown> = Object.assign({}, decoded);
    expect(merged.polluted).toBeUndefined();
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();

    const spread = { ...decoded } as Record<string, unknown>;
    expect(spread.polluted).toBeUndefined();
  });

  it('drops nested __proto__ keys too', () => {
    const decoded = decodePayload<{ a: Record<string, unknown> }>('{"a":{"__proto__":{"polluted":1},"b":1}}');
    expect(decoded.a.b).toBe(1);
    expect(Object.prototype.hasOwnProperty.call(decoded.a, '__proto__')).toBe(false);
    expect(Object.assign({}, decoded.a).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('throws on malformed JSON', () => {
    expect(() => decodePayload('{not json')).toThrow(SyntaxError);
  });

  it('decodes the deepest value encodePayload writes, objects included', () => {
    let value: Record<string, unknown> = { leaf: true };
    for (let level = 1; level < MAX_PAYLOAD_DEPTH; level++) value = { a: value };
    expect(decodePayload(encodePayload(value, 'input', LIMIT))).toEqual(value);
  });
});
