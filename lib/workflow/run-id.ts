import { randomBytes } from 'node:crypto';

/** Random bytes per generated run id: 96 bits, written as 16 base64url characters. */
const ID_BYTES = 12;
/** Ids drawn per `randomBytes` call: one call per 512 enqueues instead of one each. */
const POOL_IDS = 512;

let pool = Buffer.alloc(0);
let offset = 0;

/**
 * A new run id: 16 characters of base64url from 95 random bits, the first always a letter (so an
 * id never reads as a command-line flag). Less than half a UUID's bytes: a waiting run's key and
 * its entry in its lane are Redis's largest cost per run after the record itself.
 */
export function newRunId(): string {
  if (offset + ID_BYTES > pool.length) {
    pool = randomBytes(ID_BYTES * POOL_IDS);
    offset = 0;
  }
  pool[offset] &= 0x7f; // top six bits < 32: 'A'–'Z' or 'a'–'f'
  const id = pool.toString('base64url', offset, offset + ID_BYTES);
  offset += ID_BYTES;
  return id;
}
