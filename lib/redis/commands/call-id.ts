import { randomBytes } from 'node:crypto';

/** Random per process, so call ids never collide across processes; a counter within one (no random bytes per call). */
const CALL_ID_PREFIX = randomBytes(9).toString('base64url');
let callCount = 0;

/** A fresh id for one claiming call: its claims are kept under it for a retry (see lua/includes/claim.lua). */
export function newCallId(): string {
  return CALL_ID_PREFIX + (callCount++).toString(36);
}
