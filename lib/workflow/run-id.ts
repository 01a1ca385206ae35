import { randomBytes } from 'node:crypto';

/** Bytes per generated run id: 96 bits, written as 16 base64url characters. */
const ID_BYTES = 12;
/** Random bytes per id: all but the 42 bits of the time and the 6 random bits beside it. */
const RANDOM_BYTES = 6;
/** Ids drawn per `randomBytes` call: one call per 512 enqueues instead of one each. */
const POOL_IDS = 512;
/** Characters of an id that carry its creation time: 7 × 6 = 42 bits of milliseconds. */
const TIME_CHARS = 7;
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

let pool = Buffer.alloc(0);
let offset = 0;

/**
 * A new run id: 16 base64url characters, the first 7 the creation time (milliseconds since the
 * epoch, 42 bits) and the other 9 random (54 bits). Carrying the time lets a run record leave out
 * `createdAt` (and the lease token base derived from it): a waiting run's bytes are Redis's
 * largest cost per run (layout 4, lua/includes/records.lua). The first character is a letter
 * until the year 2083, so an id never reads as a command-line flag.
 */
export function newRunId(now = Date.now()): string {
  if (offset + RANDOM_BYTES + 1 > pool.length) {
    pool = randomBytes((RANDOM_BYTES + 1) * POOL_IDS);
    offset = 0;
  }
  const id = Buffer.allocUnsafe(ID_BYTES);
  // The time in the top 42 of the first 48 bits, 6 random bits below it; then 48 random bits.
  id.writeUIntBE(now * 64 + (pool[offset] & 63), 0, 6);
  pool.copy(id, 6, offset + 1, offset + 1 + RANDOM_BYTES);
  offset += RANDOM_BYTES + 1;
  return id.toString('base64url');
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
