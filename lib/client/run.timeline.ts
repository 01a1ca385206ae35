import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/redis.keys';
import { TIMELINE_SLOTS } from '../redis/run.layout';

/** Most attempts `QueueClient.timeline` returns: the latest ones (a run keeps no more). */
export const MAX_TIMELINE_ATTEMPTS = TIMELINE_SLOTS;

/** A top-level call of a run: a step or a durable wait. */
export type TimelineCallKind = 'step' | 'sleep' | 'signal' | 'event' | 'invoke';

/**
 * How a call ended in its attempt: `ok` (it ran, or a wait ended, and its result was stored),
 * `failed` (it threw), `replayed` (answered from the memo of an earlier attempt, ~0 ms),
 * `waiting` (the durable wait the attempt suspended in: it lasts until the next attempt starts),
 * `interrupted` (a step still running when the attempt ended, e.g. beside a step that failed).
 */
export type TimelineCallStatus = 'ok' | 'failed' | 'replayed' | 'waiting' | 'interrupted';

/** One call in an attempt of a {@link RunTimeline}. Times are ms since the epoch, on the worker's clock. */
export interface TimelineCall {
  /** A step, or which durable wait. */
  kind: TimelineCallKind;
  /** Its memo key: `<name>#<occurrence>` (waits' names carry their kind: `signal:approval#1`). */
  key: string;
  /** When the call began, in ms since the epoch. */
  start: number;
  /** When it ended, in ms since the epoch; for a `waiting` call, when the attempt suspended. */
  end: number;
  /** How the call ended in this attempt. */
  status: TimelineCallStatus;
}

/** One attempt of a {@link RunTimeline}. */
export interface TimelineAttempt {
  /** The attempt's number, 1-based. */
  attempt: number;
  /** When the attempt began, in ms since the epoch (worker's clock). */
  start: number;
  /** When the attempt ended, in ms since the epoch (worker's clock). */
  end: number;
  /** `failed`: this attempt failed (the run may have retried); `suspended`: it ended in a durable wait. */
  outcome: 'completed' | 'failed' | 'suspended';
  /** The attempt's top-level steps and waits, in the order the worker recorded them. */
  calls: TimelineCall[];
  /** Calls left out: an attempt keeps about 4 KB of calls that ran and 1 KB of replayed ones. */
  more: number;
  /** A failed attempt's error, message and stack clipped (absent from attempts stored by earlier versions). */
  error?: {
    /** The error's class name, e.g. `TypeError`. */
    name: string;
    /** Its message, clipped. */
    message: string;
    /** Its stack, clipped; absent when the error had none. */
    stack?: string;
  };
}

/**
 * When each step and wait of a run ran, attempt by attempt (what the dashboard draws). Recorded by
 * the worker and stored with each attempt's outcome; attempts that never committed one (their
 * worker died, their lease was lost) are missing.
 */
export interface RunTimeline {
  /** The recorded attempts, oldest first: at most {@link MAX_TIMELINE_ATTEMPTS}, the latest ones. */
  attempts: TimelineAttempt[];
}

const KINDS: Record<string, TimelineCallKind> = { s: 'step', z: 'sleep', g: 'signal', e: 'event', i: 'invoke' };
const STATUSES: Record<string, TimelineCallStatus> = { o: 'ok', f: 'failed', r: 'replayed', w: 'waiting', i: 'interrupted' };
const OUTCOMES: Record<string, TimelineAttempt['outcome']> = { c: 'completed', f: 'failed', s: 'suspended' };

/**
 * Reads a run's journals, oldest attempt first; null if the run does not exist. Two reads: the
 * chunk count of each slot (`tl:<slot>`), then the chunks (`tl:<slot>.<k>`, see hsetRun in
 * lua/includes/records.lua: short fields keep the run's hash compact).
 */
export async function readTimeline(redis: Redis, keys: RedisKeys, runId: string): Promise<RunTimeline | null> {
  const runKey = keys.run(runId);
  const [state, ...counts] = await redis.hmget(runKey, 'state', ...Array.from({ length: TIMELINE_SLOTS }, (_, slot) => `tl:${slot}`));
  if (state === null) return null;
  const slots = counts.flatMap((count, slot) => (Number(count) > 0 ? [{ slot, chunks: Number(count) }] : []));
  if (slots.length === 0) return { attempts: [] };
  const fields = slots.flatMap(({ slot, chunks }) => Array.from({ length: chunks }, (_, k) => `tl:${slot}.${k}`));
  const values = await redis.hmget(runKey, ...fields);
  const attempts: TimelineAttempt[] = [];
  let at = 0;
  for (const { chunks } of slots) {
    const parts = values.slice(at, (at += chunks));
    const attempt = parts.some((part) => part === null) ? undefined : parseJournal(parts.join(''));
    if (attempt) attempts.push(attempt);
  }
  return { attempts: attempts.sort((a, b) => a.attempt - b.attempt) };
}

/** Decodes one stored journal (format: AttemptJournal.encode); anything malformed is skipped rather than trusted. */
export function parseJournal(text: string): TimelineAttempt | undefined {
  const [head, ...entries] = text.split(';');
  const [attemptText, startText, durationText, outcomeCode, omittedText] = head.split('|');
  const attempt = Number(attemptText);
  const start = parseInt(startText ?? '', 36);
  const duration = Number(durationText);
  const outcome = OUTCOMES[outcomeCode ?? ''];
  if (!Number.isInteger(attempt) || attempt < 1 || !Number.isFinite(start) || !Number.isFinite(duration) || !outcome) return undefined;
  const end = start + duration;
  const calls: TimelineCall[] = [];
  let error: TimelineAttempt['error'];
  for (const entry of entries) {
    if (entry.startsWith('!')) {
      error = parseError(entry.slice(1)) ?? error;
      continue;
    }
    const match = /^([a-z])([a-z]),(\d+),(-1|\d+),(.+)$/.exec(entry);
    if (!match || !KINDS[match[1]] || !STATUSES[match[2]]) continue;
    const callStart = start + Number(match[3]);
    const callDuration = Number(match[4]);
    calls.push({
      kind: KINDS[match[1]],
      key: match[5],
      start: callStart,
      end: callDuration < 0 ? end : callStart + callDuration,
      status: STATUSES[match[2]],
    });
  }
  return { attempt, start, end, outcome, calls, more: Number(omittedText) || 0, ...(error && { error }) };
}

/** A journal's error entry (see encodeJournalError in lib/execution/attempt.journal.ts), or undefined if malformed. */
function parseError(text: string): TimelineAttempt['error'] {
  try {
    const { n, m, s } = JSON.parse(decodeURIComponent(text)) as Record<string, unknown>;
    if (typeof n !== 'string' || typeof m !== 'string') return undefined;
    return { name: n, message: m, ...(typeof s === 'string' && { stack: s }) };
  } catch {
    return undefined;
  }
}
