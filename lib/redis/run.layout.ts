/*
 * How a run's data is laid out in Redis beyond its keys (redis.keys.ts): shared by the worker that
 * writes it and the client that reads or addresses it, so neither imports the other.
 */

/**
 * Journals kept per run: attempt `n` is stored in field `tl:<n mod TIMELINE_SLOTS>`, so a run that
 * resumes a thousand times keeps the latest 50, and the hash (read whole by every claim) stays bounded.
 */
export const TIMELINE_SLOTS = 50;

/**
 * The max attempts a lean record leaves out, and an enqueue sends only when it differs
 * (DEFAULT_MAX_ATTEMPTS in lua/includes/records.lua).
 */
export const RECORD_DEFAULT_MAX_ATTEMPTS = 3;

/** An event wait's target as the scripts index it: `<name>|<key>` (`|` is in neither). */
export function eventTarget(name: string, key: string): string {
  return `${name}|${key}`;
}
