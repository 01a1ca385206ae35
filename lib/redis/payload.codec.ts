import { PayloadDecodeError, PayloadTooLargeError } from '../errors';
import { encodeJson, RICH_MARKER } from './payload.check';
import { reviveRich } from './payload.rich';

export { MAX_PAYLOAD_DEPTH } from './payload.check';

/** Encodes `undefined` (a valid step or run result), which has no JSON text of its own. */
const UNDEFINED = '';

/**
 * Encodes a payload. A value JSON keeps exactly is written as JSON, as every earlier version
 * wrote it (they read it too); one holding a `Date`, `Map`, `Set`, `BigInt`, `undefined` (in an
 * object or array), `NaN`/`±Infinity`/`-0`, `URL`, `RegExp` or typed array (`Buffer` included) is
 * written in the rich form `~rich1~[<tree>,<notes>]` (see payload.check.ts), which older versions
 * refuse with a SyntaxError instead of misreading. Anything else that JSON would drop or change
 * (functions, symbols, Error, WeakMap, Promise, cycles, holes in arrays, nesting deeper than
 * {@link MAX_PAYLOAD_DEPTH}) is a {@link PayloadNotSerializableError} naming the path. Other
 * objects with `toJSON` are encoded through it, as `JSON.stringify` does.
 */
export function encodePayload(value: unknown, field: string, maxBytes: number): string {
  const text = value === undefined ? UNDEFINED : encodeJson(value, field);
  // A UTF-16 unit is at most 3 bytes of UTF-8: a text this short fits without being measured.
  if (text.length * 3 <= maxBytes) return text;
  const bytes = Buffer.byteLength(text);
  if (bytes > maxBytes) throw new PayloadTooLargeError(field, bytes, maxBytes);
  return text;
}

/**
 * Decodes what {@link encodePayload} wrote (and what any earlier version wrote). `__proto__` keys
 * are dropped so that a payload can never reach `Object.prototype`, even if user code later merges
 * it into another object; a rich form's notes only reach own properties of what was parsed.
 * @throws PayloadDecodeError for a form this version does not know, or a damaged rich form
 */
export function decodePayload<T = unknown>(text: string | null | undefined): T {
  if (text === null || text === undefined || text === UNDEFINED) return undefined as T;
  // JSON text never starts with '~'.
  if (text.charCodeAt(0) === 126) return decodeRich(text) as T;
  return parseJson(text) as T;
}

/**
 * Decodes a JSON message a script or the client built around an encoded payload under `field`
 * (a wait's `{"p":<payload>}`, a done message's `"result":`, a progress message's `"value":`).
 * A payload in the rich form is not JSON by itself, so it is cut out and decoded on its own. The
 * payload must be the first value in the message that user data can reach, so that the first
 * `"<field>":~` is its own (every other string in these messages is a name Sluice restricts).
 */
export function decodeMessage<T = unknown>(text: string, field: string): T {
  const at = text.indexOf(`"${field}":${RICH_MARKER}`);
  if (at < 0) return decodePayload<T>(text);
  const start = at + field.length + 3;
  const end = jsonEnd(text, start + RICH_MARKER.length);
  const record = parseJson(`${text.slice(0, start)}null${text.slice(end)}`) as Record<string, unknown>;
  record[field] = decodeRich(text.slice(start, end));
  return record as T;
}

function parseJson(text: string): unknown {
  // A key can only decode to "__proto__" if the text spells it out or escapes a character (\u):
  // other texts parse without the reviver, which makes JSON.parse several times slower.
  if (!text.includes('__proto__') && !text.includes('\\u')) return JSON.parse(text);
  // The reviver makes JSON.parse recurse (a few thousand levels overflow Node 20's default stack):
  // MAX_PAYLOAD_DEPTH keeps what encodePayload writes far below that.
  return JSON.parse(text, dropProtoKeys);
}

function dropProtoKeys(key: string, value: unknown): unknown {
  return key === '__proto__' ? undefined : value;
}

/** Decodes `~rich1~[<tree>,<notes>]`: each note `[kind, ...path]` rebuilds the stand-in at its path, deepest first. */
function decodeRich(text: string): unknown {
  if (!text.startsWith(RICH_MARKER)) {
    throw new PayloadDecodeError(
      `a payload starts with ${JSON.stringify(text.slice(0, 12))}, a form this version of nest-sluice does not know (written by a newer version?)`,
    );
  }
  try {
    const parsed = parseJson(text.slice(RICH_MARKER.length));
    if (!Array.isArray(parsed) || parsed.length !== 2 || !Array.isArray(parsed[1])) throw new Error('not [tree, notes]');
    const holder: Record<string, unknown> = { root: parsed[0] };
    for (const note of parsed[1] as unknown[]) {
      if (!Array.isArray(note) || note.length === 0) throw new Error('a note is not [kind, ...path]');
      let parent: unknown = holder;
      let key: unknown = 'root';
      for (let index = 1; index < note.length; index++) {
        parent = ownChild(parent, key);
        key = note[index];
      }
      const container = parent as Record<string, unknown>;
      container[key as string] = reviveRich(note[0], ownChild(container, key));
    }
    return holder.root;
  } catch (error) {
    if (error instanceof PayloadDecodeError) throw error;
    throw new PayloadDecodeError(`a payload in the rich form is damaged: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
}

/** `parent[key]`, if `parent` is an object or array parsed from JSON and `key` one of its own keys: never a prototype. */
function ownChild(parent: unknown, key: unknown): unknown {
  if (typeof parent !== 'object' || parent === null || (typeof key !== 'string' && typeof key !== 'number') || !Object.hasOwn(parent, key))
    throw new Error(`a note's path leads nowhere (${String(key)})`);
  return (parent as Record<string, unknown>)[key];
}

/** Where the JSON array or object starting at `start` ends (the index after its closing bracket). */
function jsonEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let index = start; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (inString) {
      if (code === 92)
        index++; // a backslash escapes the next character
      else if (code === 34) inString = false;
    } else if (code === 34) {
      inString = true;
    } else if (code === 91 || code === 123) {
      depth++;
    } else if ((code === 93 || code === 125) && --depth === 0) {
      return index + 1;
    }
  }
  throw new PayloadDecodeError('a payload in the rich form is cut short in a message');
}
