import { types } from 'node:util';
import { PayloadNotSerializableError } from '../errors';

/**
 * How many arrays/objects may nest inside each other in a payload. Deeper values are a
 * {@link PayloadNotSerializableError}: walking them would overflow the stack (here, in
 * `JSON.stringify`, and in `JSON.parse` with a reviver, which recurses), and bounding the encoder
 * bounds every decoder of what it wrote.
 */
export const MAX_PAYLOAD_DEPTH = 256;

/**
 * Checks that JSON can round-trip `value` and returns what `JSON.stringify` should be given: `value`
 * itself, unless a toJSON() ran somewhere inside it; then a copy holding what toJSON() returned, so
 * toJSON() runs once and what was checked is what gets written.
 * @throws PayloadNotSerializableError naming the path of the first value JSON would drop or change
 */
export function jsonSafe(value: unknown, field: string): unknown {
  // A primitive (most results are) needs no walk: no path to track, nothing to allocate.
  if ((typeof value !== 'object' || value === null) && primitiveProblem(value) === undefined) return value;
  return resolve(value, new Walk(field));
}

/**
 * Where the walk is. Paths are built only on failure, from `keys`, so an ordinary payload costs
 * no string per value. `ancestors[i]` holds the value at `keys[i]`: the containers being walked.
 */
class Walk {
  readonly keys: (string | number)[] = [];
  readonly ancestors: object[] = [];

  constructor(readonly field: string) {}

  path(): string {
    let path = this.field;
    for (const key of this.keys) path += typeof key === 'number' ? `[${key}]` : `.${key}`;
    return path;
  }

  fail(reason: string, cause?: unknown): never {
    throw new PayloadNotSerializableError(this.path(), reason, cause === undefined ? undefined : { cause });
  }

  /** Called before walking a container's children; `leave` undoes it. */
  enter(container: object): void {
    if (this.ancestors.length >= MAX_PAYLOAD_DEPTH) this.fail(`nested more than ${MAX_PAYLOAD_DEPTH} levels deep (MAX_PAYLOAD_DEPTH)`);
    // A linear scan beats a Set at the depths payloads have, and is bounded by MAX_PAYLOAD_DEPTH.
    if (this.ancestors.includes(container)) this.fail('circular reference');
    this.ancestors.push(container);
    this.keys.push('');
  }

  leave(): void {
    this.ancestors.pop();
    this.keys.pop();
  }

  /** The key `JSON.stringify` passes to `toJSON`: '' at the top level, else the property name or index as a string. */
  key(): string {
    return this.keys.length === 0 ? '' : String(this.keys[this.keys.length - 1]);
  }
}

/** Checks `value` at the walk's current path and returns what `JSON.stringify` should be given in its place. */
function resolve(value: unknown, walk: Walk): unknown {
  if (typeof value !== 'object' || value === null) {
    const problem = primitiveProblem(value);
    if (problem !== undefined) walk.fail(problem);
    return value;
  }
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return resolveToJSON(value, toJSON as ToJSON, walk);
  return resolveObject(value, walk);
}

/** `undefined` when JSON keeps this non-object as is; else why not. */
function primitiveProblem(value: unknown): string | undefined {
  switch (typeof value) {
    case 'number':
      return Number.isFinite(value) ? undefined : `${value} has no JSON form`;
    case 'bigint':
      return 'BigInt has no JSON form (convert it to a string)';
    case 'function':
    case 'symbol':
      return `a ${typeof value} cannot be serialized`;
    default:
      // string, boolean, null, and undefined (which the callers that care reject with their own reason)
      return undefined;
  }
}

type ToJSON = (this: object, key: string) => unknown;

function resolveToJSON(object: object, toJSON: ToJSON, walk: Walk): unknown {
  let result: unknown;
  try {
    result = toJSON.call(object, walk.key());
  } catch (error) {
    walk.fail(`toJSON() threw: ${error instanceof Error ? error.message : String(error)}`, error);
  }
  if (result === undefined) walk.fail('toJSON() returned undefined, which JSON would drop');
  if (typeof result !== 'object' || result === null) {
    if (result === null && types.isDate(object)) walk.fail('an invalid Date would become null');
    const problem = primitiveProblem(result);
    if (problem !== undefined) walk.fail(`toJSON() returned a value JSON cannot keep: ${problem}`);
    return result;
  }
  // `return this` asks for the object's own properties. Left as is in the tree, JSON.stringify
  // calls toJSON() again and gets the same answer.
  if (result === object) return resolveObject(object, walk);
  // JSON.stringify does not call toJSON() on what toJSON() returned: a Date returned there would
  // become {}, and keeping such a value in the copy would have it called after all.
  if (typeof (result as { toJSON?: unknown }).toJSON === 'function') {
    walk.fail('toJSON() returned an object that has a toJSON() of its own, which JSON.stringify would not call (return plain data)');
  }
  return resolveObject(result, walk);
}

/** An object without toJSON(): an array, a plain object, a class instance, or a built-in JSON would mangle. */
function resolveObject(object: object, walk: Walk): unknown {
  if (Array.isArray(object)) return resolveArray(object, walk);
  const proto: unknown = Object.getPrototypeOf(object);
  if (proto !== Object.prototype && proto !== null) {
    const problem = builtinProblem(object);
    if (problem === BOXED) return resolveBoxed(object, walk);
    if (problem !== undefined) walk.fail(problem);
  }
  return resolveProperties(object as Record<string, unknown>, walk);
}

function resolveArray(array: unknown[], walk: Walk): unknown[] {
  walk.enter(array);
  const at = walk.keys.length - 1;
  let copy: unknown[] | undefined;
  for (let index = 0; index < array.length; index++) {
    walk.keys[at] = index;
    const item = array[index];
    if (item === undefined)
      walk.fail(index in array ? 'undefined in an array would become null' : 'a hole in a sparse array would become null');
    const resolved = resolve(item, walk);
    if (copy === undefined && resolved !== item) copy = copyItems(array, index);
    if (copy !== undefined) copy.push(resolved);
  }
  walk.leave();
  return copy ?? array;
}

function resolveProperties(object: Record<string, unknown>, walk: Walk): object {
  walk.enter(object);
  const at = walk.keys.length - 1;
  const keys = Object.keys(object);
  let copy: Record<string, unknown> | undefined;
  for (let index = 0; index < keys.length; index++) {
    const key = keys[index];
    walk.keys[at] = key;
    const value = object[key];
    const resolved = resolve(value, walk);
    if (copy === undefined && resolved !== value) copy = copyProperties(object, keys, index);
    // `undefined` stays, as JSON drops the key, like it would from the original.
    if (copy !== undefined) copy[key] = resolved;
  }
  walk.leave();
  return copy ?? object;
}

/** A plain array of the first `count` items (`slice` would construct an Array subclass through its species). */
function copyItems(array: unknown[], count: number): unknown[] {
  const copy: unknown[] = [];
  for (let index = 0; index < count; index++) copy.push(array[index]);
  return copy;
}

/**
 * A prototype-less copy of the first `count` properties: JSON.stringify writes the same keys in
 * the same order, and an own `__proto__` key stays a key instead of setting the prototype.
 */
function copyProperties(object: Record<string, unknown>, keys: string[], count: number): Record<string, unknown> {
  const copy = Object.create(null) as Record<string, unknown>;
  for (let index = 0; index < count; index++) copy[keys[index]] = object[keys[index]];
  return copy;
}

/** Marks a Number/String/Boolean/BigInt/Symbol object, which JSON.stringify unwraps or mangles. */
const BOXED = '\0boxed';

const ERROR_REASON = 'an Error would lose its name, message and stack in JSON (pass { name, message } instead)';

/**
 * Why JSON would silently mangle this non-plain object, `BOXED`, or `undefined` for a class
 * instance (kept as its own enumerable properties, as JSON does). Only objects whose prototype is
 * not `Object.prototype` get here, and class instances answer after one call, so a payload of
 * plain data pays nothing for this list.
 */
function builtinProblem(object: object): string | undefined {
  // Typed arrays and DataView (a Buffer never gets here: its toJSON() gives { type, data }).
  if (ArrayBuffer.isView(object)) {
    return types.isDataView(object)
      ? 'a DataView would serialize as {} (copy its bytes into an array or a base64 string)'
      : `a typed array (${typeName(object)}) would serialize as an object keyed by index (convert it with Array.from() or to a base64 string)`;
  }
  // Brand checks from internal slots or @@toStringTag: they also work across realms (vm, Jest).
  switch (Object.prototype.toString.call(object)) {
    case '[object Object]':
      return undefined;
    case '[object Map]':
    case '[object Set]':
    case '[object WeakMap]':
    case '[object WeakSet]':
      return `a ${typeName(object)} would serialize as {} (convert it to an array or object)`;
    case '[object RegExp]':
      return 'a RegExp would serialize as {} (pass its source and flags as strings)';
    case '[object Error]':
      return ERROR_REASON;
    case '[object ArrayBuffer]':
      return 'an ArrayBuffer would serialize as {} (copy its bytes into an array or a base64 string)';
    case '[object SharedArrayBuffer]':
      return 'a SharedArrayBuffer would serialize as {} (copy its bytes into an array or a base64 string)';
    case '[object Promise]':
      return 'a Promise would serialize as {} (await it first)';
    case '[object WeakRef]':
      return 'a WeakRef would serialize as {} (pass the value it holds)';
    case '[object Number]':
    case '[object String]':
    case '[object Boolean]':
    case '[object BigInt]':
    case '[object Symbol]':
      // The tag can be faked by a class; the slot check cannot, and only runs for these tags.
      return types.isBoxedPrimitive(object) ? BOXED : undefined;
    default:
      // An Error whose class renamed its @@toStringTag.
      return types.isNativeError(object) ? ERROR_REASON : undefined;
  }
}

/** JSON.stringify writes a Number/String/Boolean object as its primitive; a Symbol object would become {}. */
function resolveBoxed(object: object, walk: Walk): unknown {
  const primitive: unknown = object.valueOf();
  if (typeof primitive === 'symbol') walk.fail('a Symbol object would serialize as {}');
  const problem = primitiveProblem(primitive);
  if (problem !== undefined) walk.fail(problem);
  return object;
}

function typeName(object: object): string {
  const name: unknown = (object as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' ? name : 'object';
}
