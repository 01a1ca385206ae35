import { types } from 'node:util';
import { PayloadNotSerializableError } from '../errors';
import { richForm, richObjectKind, richPrimitiveKind, typeName, type RichKind } from './payload.rich';

/**
 * How many arrays/objects may nest inside each other in a payload. Deeper values are a
 * {@link PayloadNotSerializableError}: walking them would overflow the stack (here, in
 * `JSON.stringify`, and in `JSON.parse` with a reviver, which recurses), and bounding the encoder
 * bounds every decoder of what it wrote.
 */
export const MAX_PAYLOAD_DEPTH = 256;

/** Starts a payload in the rich form (see payload.codec.ts); JSON text never starts with `~`. */
export const RICH_MARKER = '~rich1~';

/**
 * Encodes `value` (not `undefined`) as JSON text when JSON keeps it exactly, else in the rich form
 * `~rich1~[<tree>,<notes>]`: `<tree>` is JSON with each rich value (payload.rich.ts) replaced by
 * its stand-in, and each note `[kind, ...path]` says where one was, deepest first.
 * @throws PayloadNotSerializableError naming the path of the first value neither form can keep
 */
export function encodeJson(value: unknown, field: string): string {
  // A primitive (most results are) needs no walk: no path to track, nothing to allocate.
  if ((typeof value !== 'object' || value === null) && primitiveProblem(value) === undefined && richPrimitiveKind(value) === undefined)
    return JSON.stringify(value);
  const walk = new Walk(field);
  const tree = JSON.stringify(resolve(value, walk));
  return walk.notes === undefined ? tree : `${RICH_MARKER}[${tree},${JSON.stringify(walk.notes)}]`;
}

/**
 * Where the walk is. Paths are built only on failure, from `keys`, so an ordinary payload costs
 * no string per value. `ancestors[i]` holds the value at `keys[i]`: the containers being walked.
 */
class Walk {
  readonly keys: (string | number)[] = [];
  readonly ancestors: object[] = [];
  /** Where rich values were, children before their container: `[kind, ...path]` each. */
  notes: unknown[][] | undefined;

  constructor(readonly field: string) {}

  /** Records that the value at the current path is a rich value of `kind`. */
  note(kind: RichKind): void {
    (this.notes ??= []).push([kind, ...this.keys]);
  }

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
    const kind = richPrimitiveKind(value);
    if (kind === undefined) return value;
    walk.note(kind);
    return richForm(kind, value);
  }
  // Plain objects and arrays (nearly every value of a payload) skip the rich kinds' checks.
  if (!Array.isArray(value)) {
    const proto: unknown = Object.getPrototypeOf(value);
    const kind = proto === Object.prototype || proto === null ? undefined : richObjectKind(value);
    if (kind !== undefined) return resolveRich(value, kind, walk);
  }
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return resolveToJSON(value, toJSON as ToJSON, walk);
  return resolveObject(value, walk);
}

/** A rich value's stand-in, its members (a Map's keys and values, a Set's members) checked in turn, and its note. */
function resolveRich(value: object, kind: RichKind, walk: Walk): unknown {
  let form = richForm(kind, value);
  // Walked as arrays, with the Map or Set itself as the ancestor: a Map holding itself is a cycle.
  if (kind === 'Map' || kind === 'Set') form = resolveArray(form as unknown[], walk, value);
  walk.note(kind);
  return form;
}

/** `undefined` when a payload can keep this non-object (as JSON or as a rich value); else why not. */
function primitiveProblem(value: unknown): string | undefined {
  switch (typeof value) {
    case 'function':
    case 'symbol':
      return `a ${typeof value} cannot be serialized`;
    default:
      // string, number, bigint, boolean, null, and undefined (which the callers that care reject with their own reason)
      return undefined;
  }
}

/** Why a primitive that must be JSON as it is (what a toJSON() returns, a boxed value's primitive) is not. */
function jsonOnlyProblem(value: unknown): string | undefined {
  const kind = richPrimitiveKind(value);
  if (kind === undefined) return undefined;
  return kind === 'BigInt' ? 'BigInt has no JSON form' : `${String(value)} has no JSON form`;
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
    const problem = primitiveProblem(result) ?? jsonOnlyProblem(result);
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

/** `identity`: the ancestor the cycle check knows the array as (the Map or Set it stands in for). */
function resolveArray(array: unknown[], walk: Walk, identity: object = array): unknown[] {
  walk.enter(identity);
  const at = walk.keys.length - 1;
  let copy: unknown[] | undefined;
  for (let index = 0; index < array.length; index++) {
    walk.keys[at] = index;
    const item = array[index];
    if (item === undefined && !(index in array)) walk.fail('a hole in a sparse array would become null (fill it, e.g. with undefined)');
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
  // A DataView, or a typed array of a class the rich kinds do not know (a subclass).
  if (ArrayBuffer.isView(object)) {
    return types.isDataView(object)
      ? 'a DataView would serialize as {} (copy its bytes into a Uint8Array)'
      : `a typed array of class ${typeName(object)} cannot be kept (copy it into a built-in typed array)`;
  }
  // Brand checks from internal slots or @@toStringTag: they also work across realms (vm, Jest).
  switch (Object.prototype.toString.call(object)) {
    case '[object Object]':
      return undefined;
    case '[object WeakMap]':
    case '[object WeakSet]':
      return `a ${typeName(object)} would serialize as {} (convert it to an array or object)`;
    case '[object Error]':
      return ERROR_REASON;
    case '[object ArrayBuffer]':
      return 'an ArrayBuffer would serialize as {} (wrap it in a Uint8Array)';
    case '[object SharedArrayBuffer]':
      return 'a SharedArrayBuffer would serialize as {} (copy its bytes into a Uint8Array)';
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
  const problem = primitiveProblem(primitive) ?? jsonOnlyProblem(primitive);
  if (problem !== undefined) walk.fail(problem);
  return object;
}
