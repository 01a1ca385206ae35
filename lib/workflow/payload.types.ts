import { decodePayload, encodePayload } from '../redis/payload.codec';

/** What another value with a `toJSON()` method is written as. */
interface HasToJSON<R> {
  /** Returns what the value is written as. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- matches every toJSON signature (Date's takes a key); public type (API report)
  toJSON(...args: any[]): R;
}

/** The typed arrays a payload keeps (a `Buffer` is a `Uint8Array` and stays a `Buffer`). */
type TypedArray =
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;

/**
 * Values a payload cannot keep: the encoder throws `PayloadNotSerializableError` for them as a
 * step or run result and anywhere inside one, so the type maps them to `never`.
 */
/* eslint-disable @typescript-eslint/no-explicit-any -- each member matches every value of its kind; public type (API report) */
type Unrepresentable =
  symbol | ((...args: any[]) => any) | WeakMap<any, any> | WeakSet<any> | WeakRef<any> | Error | PromiseLike<any> | DataView | ArrayBuffer;
/* eslint-enable @typescript-eslint/no-explicit-any */

/** Property values that are not own data (methods) or have no key JSON writes (symbols): they disappear from an object type. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- matches every function; public type (API report)
type Dropped = symbol | ((...args: any[]) => any);

/** `true` if `T` is `any`, else `false`. */
type IsAny<T> = 0 extends 1 & T ? true : false;

/** Keys a payload writes: string or number keys whose value is not always dropped. */
type KeptKeys<T> = {
  [K in keyof T]-?: K extends string | number ? ([Exclude<T[K], Dropped>] extends [never] ? never : K) : never;
}[keyof T];

/** Kept keys, writable (a decoded object is a fresh one), an optional key still optional, values stored in turn; flattened for editors. */
type StoredObject<T> = { -readonly [K in keyof T as K extends KeptKeys<T> ? K : never]: Stored<Exclude<T[K], Dropped>> } & {};

// Date, URL and Buffer have a toJSON(), which the encoder does not call for them: checked first.
/** {@link Stored} of a `T` that is neither `any` nor `unknown`, case by case. */
type StoredValue<T> = T extends string | number | boolean | bigint | null | undefined
  ? T
  : T extends void
    ? undefined
    : T extends Date | RegExp | URL | TypedArray
      ? T
      : T extends ReadonlyMap<infer K, infer V>
        ? Map<Stored<K>, Stored<V>>
        : T extends ReadonlySet<infer M>
          ? Set<Stored<M>>
          : T extends HasToJSON<infer R>
            ? Stored<R>
            : T extends Unrepresentable
              ? never
              : T extends readonly unknown[]
                ? { -readonly [I in keyof T]: Stored<T[I]> }
                : T extends object
                  ? StoredObject<T>
                  : never;

/**
 * The type a value has after Sluice stores it in Redis and reads it back, as every run input,
 * step result, run result, signal and event payload is:
 *
 * - JSON values, `undefined` (in objects and arrays too), `bigint`, `NaN`/`±Infinity`, `Date`,
 *   `Map`, `Set`, `URL`, `RegExp` and typed arrays (a `Buffer` included) come back as they were;
 * - another value with `toJSON()` becomes what `toJSON()` returns;
 * - class instances become plain objects of their own data properties (their prototype is lost,
 *   so `instanceof` no longer holds; the type cannot say that), and methods disappear;
 * - functions, symbols, `Error`, `WeakMap`/`WeakSet`, promises, `ArrayBuffer` and `DataView` are
 *   `never`: the encoder throws `PayloadNotSerializableError` for them rather than mangle them.
 *
 * `ctx.step(...)` returns `Promise<Stored<T>>`. A `@Step` method's declared type cannot be changed
 * by a decorator: for a result holding class instances, annotate it `Promise<Stored<T>>` and return
 * {@link roundTrip}`(value)`.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- Stored<any> stays any, so untyped code is not forced to cast; public API
export type Stored<T> = IsAny<T> extends true ? any : unknown extends T ? unknown : StoredValue<T>;

/**
 * Puts `value` through the same encoding a step result takes (same checks, same errors), typed
 * {@link Stored}. Use it in a `@Step` method declared `Promise<Stored<T>>`, so the method's type
 * matches what the run sees, also when a unit test calls the method outside a run.
 * @throws PayloadNotSerializableError naming the path of a value a payload cannot keep
 */
export function roundTrip<T>(value: T): Stored<T> {
  // No size bound here: the step recorder applies maxPayloadBytes to the result it persists.
  return decodePayload<Stored<T>>(encodePayload(value, 'value', Number.MAX_SAFE_INTEGER));
}

/**
 * The old name of {@link Stored}, from when payloads were JSON only.
 * @deprecated Payloads are no longer limited to JSON: use {@link Stored}, which this is now an alias of.
 */
export type Jsonified<T> = Stored<T>;

/**
 * The old name of {@link roundTrip}, from when payloads were JSON only.
 * @deprecated Use {@link roundTrip}, which this is now an alias of (a `Date` stays a `Date`).
 */
export const jsonify: <T>(value: T) => Stored<T> = roundTrip;
