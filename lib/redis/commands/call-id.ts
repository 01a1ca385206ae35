import { randomBytes } from 'node:crypto';

/**
 * Ids unique across processes without random bytes per id: a random prefix per process (of
 * `prefixBytes`), then a counter within it.
 */
export function uniqueIds(prefixBytes: number): () => string {
  const prefix = randomBytes(prefixBytes).toString('base64url');
  let count = 0;
  return () => prefix + (count++).toString(36);
}

/** A fresh id for one claiming call: its claims are kept under it for a retry (see lua/includes/claim.lua). */
export const newCallId = uniqueIds(9);
