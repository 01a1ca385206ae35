import { InvalidOptionError } from '../errors';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration in ms, or a string such as `'500ms'`, `'30s'`, `'10m'`, `'2h'`, `'1d'`. */
export type Duration = number | string;

/** Parses a {@link Duration} into whole milliseconds; rejects negative, NaN, infinite and malformed values. */
export function toMilliseconds(value: Duration, field: string): number {
  if (typeof value === 'number') return checkMs(value, field);
  if (typeof value === 'string') {
    const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(value);
    if (!match)
      throw new InvalidOptionError(field, `"${value}" is not a duration (use ms as a number, or e.g. '500ms', '30s', '10m', '2h', '1d')`);
    return checkMs(Number(match[1]) * UNIT_MS[match[2]], field);
  }
  throw new InvalidOptionError(field, `expected a number of ms or a duration string, got ${typeof value}`);
}

function checkMs(ms: number, field: string): number {
  if (!Number.isFinite(ms) || ms < 0) throw new InvalidOptionError(field, `must be a finite number >= 0, got ${ms}`);
  if (ms > 10 * 365 * UNIT_MS.d) throw new InvalidOptionError(field, `must be at most 10 years, got ${ms} ms`);
  return Math.round(ms);
}

/** Checks an integer option within bounds and returns it. */
export function checkInteger(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionError(field, `must be an integer from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}
