import { InvalidInputError, PayloadNotSerializableError, PayloadTooLargeError } from '../../lib';
import { decodePayload, DEFAULT_MAX_PAYLOAD_BYTES, encodePayload } from '../../lib/redis/payload.codec';

const LIMIT = DEFAULT_MAX_PAYLOAD_BYTES;

function encodeError(value: unknown, field = 'input'): Error {
  try {
    encodePayload(value, field, LIMIT);
  } catch (error) {
    return error as Error;
  }
  throw new Error('encodePayload did not throw');
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
    ['a BigInt', { n: BigInt(1) }, 'input.n'],
    ['a symbol', { s: Symbol('s') }, 'input.s'],
    ['NaN', { list: [1, NaN] }, 'input.list[1]'],
    ['Infinity', { v: Infinity }, 'input.v'],
    ['-Infinity', { v: -Infinity }, 'input.v'],
    ['a Map', { m: new Map([[1, 2]]) }, 'input.m'],
    ['a Set', { s: new Set([1]) }, 'input.s'],
    ['undefined in an array', { items: ['a', undefined] }, 'input.items[1]'],
  ])('rejects %s with PayloadNotSerializableError naming the path', (_label, value, path) => {
    const error = encodeError(value);
    expect(error).toBeInstanceOf(PayloadNotSerializableError);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect(error.message).toContain(path);
    expect((error as PayloadNotSerializableError).field).toBe(path);
  });

  it('rejects top-level non-serializable values', () => {
    expect(encodeError(() => 1)).toBeInstanceOf(PayloadNotSerializableError);
    expect(encodeError(BigInt(2))).toBeInstanceOf(PayloadNotSerializableError);
    expect(encodeError(NaN)).toBeInstanceOf(PayloadNotSerializableError);
    expect(encodeError(new Map())).toBeInstanceOf(PayloadNotSerializableError);
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
    expect(encodeError({ n: BigInt(1) }, 'step "x#1" result').message).toContain('step "x#1" result.n');
  });

  it('encodes Date through toJSON', () => {
    const date = new Date('2024-01-02T03:04:05.678Z');
    const encoded = encodePayload({ at: date }, 'input', LIMIT);
    expect(encoded).toBe('{"at":"2024-01-02T03:04:05.678Z"}');
    expect(decodePayload(encoded)).toEqual({ at: '2024-01-02T03:04:05.678Z' });
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

    const merged = Object.assign({}, decoded) as Record<string, unknown>;
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
});
