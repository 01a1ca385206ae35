import { decodePayload, encodePayload } from '../redis/payload.codec';

/** What a value with a `toJSON()` method is written as (a `Date`'s is a `string`). */
interface HasToJSON<R> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- matches every toJSON signature (Date's takes a key); public type (API report)
  toJSON(...args: any[]): R;
}

/**
 * Values JSON has no form for. Sluice's encoder rejects them (`PayloadNotSerializableError`) as a
 * step or run result and anywhere inside one, so the type maps them to `never`. A method of a class
 * instance is not an own property and JSON skips it, so methods simply disappear from an object type.
 */
/* eslint-disable @typescript-eslint/no-explicit-any -- each member matches every value of its kind; public type (API report) */
type Unrepresentable =
  | bigint
  | symbol
  | ((...args: any[]) => any)
  | ReadonlyMap<any, any>
  | ReadonlySet<any>
  | WeakMap<any, any>
  | WeakSet<any>
  | RegExp
  | Error
  | PromiseLike<any>
  | ArrayBufferView
  | ArrayBuffer;
/* eslint-enable @typescript-eslint/no-explicit-any */

/** Property values JSON drops with their key (`undefined`), or that are not own data (methods). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- matches every function; public type (API report)
type Dropped = undefined | symbol | ((...args: any[]) => any);

type IsAny<T> = 0 extends 1 & T ? true : false;

/** Keys JSON writes (string or number keys whose value is not always dropped). */
type KeptKeys<T> = {
  [K in keyof T]-?: K extends string | number ? ([Exclude<T[K], Dropped>] extends [never] ? never : K) : never;
}[keyof T];

/** Kept keys whose value may be `undefined` (or that are optional): JSON may drop them, so they come back optional. */
type MaybeDroppedKeys<T> = {
  [K in KeptKeys<T>]-?: IsAny<T[K]> extends true ? never : undefined extends T[K] ? K : never;
}[KeptKeys<T>];

/** Flattens an intersection into one object type, so an editor shows `{ a: string; b?: number }`. */
type Simplify<T> = { [K in keyof T]: T[K] } & {};

type JsonifiedObject<T> = Simplify<
  { [K in Exclude<KeptKeys<T>, MaybeDroppedKeys<T>>]: Jsonified<T[K]> } & { [K in MaybeDroppedKeys<T>]?: Jsonified<Exclude<T[K], Dropped>> }
>;

/** `undefined` (and holes) inside an array are rejected by the encoder, rather than becoming `null`. */
type JsonifiedArray<T extends readonly unknown[]> = { -readonly [I in keyof T]: Jsonified<Exclude<T[I], undefined>> };

// toJSON() is asked first, as the encoder does: a Buffer is a typed array, but it has one.
type JsonifiedValue<T> = T extends string | number | boolean | null | undefined
  ? T
  : T extends void
    ? undefined
    : T extends HasToJSON<infer R>
      ? Jsonified<R>
      : T extends Unrepresentable
        ? never
        : T extends readonly unknown[]
          ? JsonifiedArray<T>
          : T extends object
            ? JsonifiedObject<T>
            : never;

/**
 * The type a value has after the JSON round trip Sluice puts every step result, run input and
 * run result through (`JSON.stringify`, then `JSON.parse`), so the types say what the code gets:
 *
 * - a value with `toJSON()` becomes what `toJSON()` returns: a `Date` becomes a `string`, a
 *   `Buffer` becomes `{ type: 'Buffer'; data: number[] }`;
 * - object properties whose value may be `undefined` come back optional (JSON drops the key), and
 *   methods and function- or symbol-valued properties disappear;
 * - class instances become plain objects of their data properties (their prototype is lost, so
 *   `instanceof` no longer holds — the type cannot say that, nor hide getters defined on the class);
 * - `bigint`, symbols, functions, `Map`/`Set`, `RegExp`, `Error`, typed arrays and promises are
 *   `never`: the encoder throws `PayloadNotSerializableError` for them rather than mangle them;
 * - a top-level `undefined` stays `undefined` (a step or run may return nothing).
 *
 * `ctx.step(...)` returns `Promise<Jsonified<T>>`. A `@Step` method's declared type cannot be changed
 * by a decorator: annotate it `Promise<Jsonified<T>>` and return {@link jsonify}`(value)`, or
 * keep step results to plain JSON data (strings rather than `Date`s).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- Jsonified<any> stays any, so untyped code is not forced to cast; public API
export type Jsonified<T> = IsAny<T> extends true ? any : unknown extends T ? unknown : JsonifiedValue<T>;

/**
 * Puts `value` through the same JSON round trip a step result takes (same checks, same errors),
 * typed {@link Jsonified}. Use it in a `@Step` method declared `Promise<Jsonified<T>>`, so the
 * method's type matches what the run sees, also when a unit test calls the method outside a run.
 * @throws PayloadNotSerializableError naming the path of a value JSON cannot round-trip
 */
export function jsonify<T>(value: T): Jsonified<T> {
  // No size bound here: the step recorder applies maxPayloadBytes to the result it persists.
  return decodePayload<Jsonified<T>>(encodePayload(value, 'value', Number.MAX_SAFE_INTEGER));
}
