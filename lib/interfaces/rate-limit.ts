import { InvalidOptionError } from '../errors';
import { checkInteger } from '../util/duration';
import { checkOptionKeys } from '../util/option-keys';

/** Largest cap that can be stored, and most starts a rate window allows. */
export const MAX_LIMIT = 1_000_000;

/**
 * At most `max` run starts per `perMs`, fleet-wide, over any window of that length: a run starts
 * only if fewer than `max` runs of the same level started in the `perMs` before (a sliding
 * window, so no burst of 2 × max across a window boundary). Every claim counts, retries included.
 */
export interface RateLimit {
  /** Starts allowed per window, 1 to 1,000,000. */
  max: number;
  /** Window length in ms, 1 to 2,147,483,647. */
  perMs: number;
}

/** Longest rate window: the largest timer Node schedules. */
export const MAX_RATE_WINDOW_MS = 2_147_483_647;

/** Validates a rate limit (`null` removes one where that is allowed) and returns a clean copy. */
export function checkRateLimit(value: unknown, field: string): RateLimit {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidOptionError(field, 'must be an object { max, perMs }');
  }
  checkOptionKeys(value, ['max', 'perMs'], field);
  const { max, perMs } = value as Partial<RateLimit>;
  return { max: checkInteger(max, `${field}.max`, 1, MAX_LIMIT), perMs: checkInteger(perMs, `${field}.perMs`, 1, MAX_RATE_WINDOW_MS) };
}

/** A rate limit as stored in the limits hash (max, window) → the public shape, or null. */
export function toRateLimit(max: string | number | null | undefined, perMs: string | number | null | undefined): RateLimit | null {
  if (max === null || max === undefined || max === '') return null;
  return { max: Number(max), perMs: Number(perMs) };
}
