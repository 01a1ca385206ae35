import { randomBytes } from 'node:crypto';

/** Random characters per id: 9 × 6 = 54 bits beside the time's 42. */
const RANDOM_CHARS = 9;
/** Ids drawn per `randomBytes` call: one call per 512 enqueues instead of one each. */
const POOL_IDS = 512;
/** Characters of an id that carry its creation time: 7 × 6 = 42 bits of milliseconds. */
const TIME_CHARS = 7;
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** Random base64url characters, 6 random bits each, taken 9 at a time. */
let pool = '';
let offset = 0;
/** The time characters of the last millisecond an id was made in (most enqueues share one with the one before). */
let lastMs = -1;
let lastTimeChars = '';

/**
 * A new run id: 16 base64url characters, the first 7 the creation time (milliseconds since the
 * epoch, 42 bits) and the other 9 random (54 bits). Carrying the time lets a run record leave out
 * `createdAt` (and the lease token base derived from it): a waiting run's bytes are Redis's
 * largest cost per run (layout 4, lua/includes/records.lua). The first character is a letter
 * until the year 2083, so an id never reads as a command-line flag. Made of strings (the time's
 * characters, kept for the millisecond, and a slice of a pool of random ones) rather than a
 * buffer written and encoded per id, which cost a lone enqueue about 2 µs of Node CPU.
 */
export function newRunId(now = Date.now()): string {
  if (offset + RANDOM_CHARS > pool.length) {
    pool = randomBytes((RANDOM_CHARS * 6 * POOL_IDS) / 8).toString('base64url');
    offset = 0;
  }
  if (now !== lastMs) {
    lastMs = now;
    lastTimeChars = timeChars(now);
  }
  const id = lastTimeChars + pool.slice(offset, offset + RANDOM_CHARS);
  offset += RANDOM_CHARS;
  return id;
}

/** `ms` as 7 base64url characters, most significant first (see {@link runIdTime}). */
function timeChars(ms: number): string {
  let chars = '';
  for (let i = 0; i < TIME_CHARS; i++) {
    chars = ALPHABET[ms % 64] + chars;
    ms = Math.floor(ms / 64);
  }
  return chars;
}

/**
 * The creation time a generated run id carries (see {@link newRunId}), in ms since the epoch;
 * `undefined` for an id that is not 16 base64url characters. A caller-given id of that shape gives
 * a time too: only a record without `createdAt` (one whose id was generated) is read this way.
 */
export function runIdTime(id: string): number | undefined {
  if (id.length !== 16) return undefined;
  let ms = 0;
  for (let i = 0; i < TIME_CHARS; i++) {
    const digit = ALPHABET.indexOf(id[i]);
    if (digit < 0) return undefined;
    ms = ms * 64 + digit;
  }
  return ms;
}
