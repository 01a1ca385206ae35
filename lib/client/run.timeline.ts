import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/redis.keys';

/** Most attempts `QueueClient.timeline` returns: the latest ones. */
export const MAX_TIMELINE_ATTEMPTS = 50;

/** A top-level call of a run: a step or a durable wait. */
export type TimelineCallKind = 'step' | 'sleep' | 'signal' | 'event' | 'invoke';

/**
 * How a call ended in its attempt: `ok` (it ran, or a wait ended, and its result was stored),
 * `failed` (it threw), `replayed` (answered from the memo of an earlier attempt, ~0 ms),
 * `waiting` (the durable wait the attempt suspended in: it lasts until the next attempt starts).
 */
export type TimelineCallStatus = 'ok' | 'failed' | 'replayed' | 'waiting';

/** One call in an attempt of a {@link RunTimeline}. Times are ms since the epoch, on the worker's clock. */
export interface TimelineCall {
  kind: TimelineCallKind;
  /** Its memo key: `<name>#<occurrence>` (waits' names carry their kind: `signal:approval#1`). */
  key: string;
  start: number;
  /** For a `waiting` call, when the attempt suspended. */
  end: number;
  status: TimelineCallStatus;
}

/** One attempt of a {@link RunTimeline}. */
export interface TimelineAttempt {
  attempt: number;
  start: number;
  end: number;
  /** `failed`: this attempt failed (the run may have retried); `suspended`: it ended in a durable wait. */
  outcome: 'completed' | 'failed' | 'suspended';
  calls: TimelineCall[];
  /** Calls left out: an attempt keeps about 4 KB of calls. */
  more: number;
}

/**
 * When each step and wait of a run ran, attempt by attempt (what the dashboard draws). Recorded by
 * the worker and stored with each attempt's outcome; attempts that never committed one (their
 * worker died, their lease was lost) are missing.
 */
export interface RunTimeline {
  attempts: TimelineAttempt[];
}

const KINDS: Record<string, TimelineCallKind> = { s: 'step', z: 'sleep', g: 'signal', e: 'event', i: 'invoke' };
const STATUSES: Record<string, TimelineCallStatus> = { o: 'ok', f: 'failed', r: 'replayed', w: 'waiting' };
const OUTCOMES = new Set(['completed', 'failed', 'suspended']);

/** Reads a run's journals (`tl:<attempt>` fields, see lib/worker/attempt.journal.ts): null if the run does not exist. */
export async function readTimeline(redis: Redis, keys: RedisKeys, runId: string): Promise<RunTimeline | null> {
  const runKey = keys.run(runId);
  const [state, attempts] = await redis.hmget(runKey, 'state', 'attempts');
  if (state === null) return null;
  const last = Number(attempts) || 0;
  const first = Math.max(1, last - MAX_TIMELINE_ATTEMPTS + 1);
  if (last < first) return { attempts: [] };
  const numbers = Array.from({ length: last - first + 1 }, (_, i) => first + i);
  const values = await redis.hmget(runKey, ...numbers.map((n) => `tl:${n}`));
  const parsed = values.map((value, i) => (value === null ? undefined : parseJournal(numbers[i], value)));
  return { attempts: parsed.filter((attempt): attempt is TimelineAttempt => attempt !== undefined) };
}

/** Decodes one stored journal; anything malformed is skipped rather than trusted. */
export function parseJournal(attempt: number, text: string): TimelineAttempt | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (raw === null || typeof raw !== 'object') return undefined;
  const { s, e, o, c, m } = raw as Record<string, unknown>;
  if (typeof s !== 'number' || typeof e !== 'number' || typeof o !== 'string' || !OUTCOMES.has(o) || !Array.isArray(c)) return undefined;
  const calls: TimelineCall[] = [];
  for (const entry of c) {
    if (!Array.isArray(entry) || entry.length !== 5) continue;
    const [kind, key, offset, duration, status] = entry as unknown[];
    if (typeof kind !== 'string' || !KINDS[kind] || typeof key !== 'string' || typeof offset !== 'number' || typeof duration !== 'number' || typeof status !== 'string' || !STATUSES[status]) continue;
    const start = s + offset;
    calls.push({ kind: KINDS[kind], key, start, end: duration < 0 ? e : start + duration, status: STATUSES[status] });
  }
  return { attempt, start: s, end: e, outcome: o as TimelineAttempt['outcome'], calls, more: typeof m === 'number' ? m : 0 };
}
