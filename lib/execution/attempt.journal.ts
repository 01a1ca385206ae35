import { TIMELINE_SLOTS } from '../redis/run.layout';

/** What a top-level step or wait calls itself in the memo. */
export type CallKind = 'step' | 'sleep' | 'signal' | 'event' | 'invoke';

/** How a call of an attempt ended, as the journal stores it (one letter each, see {@link AttemptJournal}). */
export type JournalStatus = 'ok' | 'failed' | 'replayed' | 'waiting' | 'interrupted';

/** How an attempt ended, as its journal stores it ('failed': this attempt failed, whether or not the run retries). */
export type JournalOutcome = 'completed' | 'failed' | 'suspended';

/** Most bytes of executed calls one attempt's journal keeps; later calls are only counted (`m`). */
export const MAX_JOURNAL_BYTES = 4096;
/** Most bytes of replayed calls it keeps, apart: a long replay never crowds out the calls that ran. */
export const MAX_REPLAY_BYTES = 1024;
/** A failed attempt's error as its journal keeps it (clipped: see {@link encodeJournalError}). */
export interface JournalError {
  name: string;
  message: string;
  stack?: string;
}

/** Longest message and stack an attempt's journal keeps (the run's `error` field has the last one in full). */
export const MAX_JOURNAL_ERROR = { message: 500, stack: 2000 };

/** `;!` and the error's JSON, URI-encoded: the journal's separators never occur in it. */
export function encodeJournalError(error: JournalError): string {
  const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…` : text);
  const stored = {
    n: clip(error.name, 100),
    m: clip(error.message, MAX_JOURNAL_ERROR.message),
    ...(error.stack && { s: clip(error.stack, MAX_JOURNAL_ERROR.stack) }),
  };
  return `;!${encodeURIComponent(JSON.stringify(stored))}`;
}

const STATUS_CODE: Record<JournalStatus, string> = { ok: 'o', failed: 'f', replayed: 'r', waiting: 'w', interrupted: 'i' };
const KIND_CODE: Record<CallKind, string> = { step: 's', sleep: 'z', signal: 'g', event: 'e', invoke: 'i' };
const OUTCOME_CODE: Record<JournalOutcome, string> = { completed: 'c', failed: 'f', suspended: 's' };

/** The last time written in base 36, and its text: the attempts that start in the same millisecond share it. */
let lastMs = -1;
let lastMs36 = '';

function base36(ms: number): string {
  if (ms !== lastMs) {
    lastMs = ms;
    lastMs36 = ms.toString(36);
  }
  return lastMs36;
}

/** One call as stored: kind, memo key, start (ms after the attempt's start), duration (ms; -1 open), status. */
type Entry = [string, string, number, number, string];

/**
 * When each top-level call of one attempt ran and how it ended: what the dashboard draws as the
 * run's step timeline. Kept in memory (a push per call, on the worker's clock) and stored once, with
 * the attempt's outcome, in the run hash by the script that commits it (complete, fail, suspend),
 * inside the write it already makes: no Redis command of its own. An attempt that never commits
 * (its worker died, its lease was lost) leaves no journal.
 */
export class AttemptJournal {
  private readonly startedAt = Date.now();
  private readonly entries: Entry[] = [];
  /** Bytes kept of executed calls, and of replayed ones (see {@link MAX_JOURNAL_BYTES}). */
  private usedRun = 0;
  private usedReplayed = 0;
  private omitted = 0;

  /** A call that starts now; the function returned ends it (calls the journal has no room for are only counted). */
  begin(kind: CallKind, key: string): (status: JournalStatus) => void {
    const entry = this.add(kind, key, 'waiting', false);
    if (!entry) return () => undefined;
    return (status) => {
      entry[3] = Date.now() - this.startedAt - entry[2];
      entry[4] = STATUS_CODE[status];
    };
  }

  /** A call answered from the memo (a replayed step or wait). */
  replayed(kind: CallKind, key: string): void {
    const entry = this.add(kind, key, 'replayed', true);
    if (entry) entry[3] = 0;
  }

  /**
   * The journal as the committing script stores it: `<slot> <text>` (see hsetRun in
   * lua/includes/records.lua), the text compact because every completed run keeps it:
   * `<attempt>|<start ms, base 36>|<duration ms>|<outcome>|<calls left out>` then, per call,
   * `;<kind><status>,<start offset ms>,<duration ms, -1 open>,<memo key>` (names hold no `;` or
   * `,`: see checkId). A step still open when the attempt ended (running beside a failure) is
   * `interrupted`; an open wait is the one the attempt suspended in. A failed attempt's error
   * ends it as `;!<JSON, URI-encoded>` (no `;` or `|`; readers that predate it skip the entry).
   */
  encode(attempt: number, outcome: JournalOutcome, error?: JournalError): string {
    const now = Date.now() - this.startedAt;
    let text = `${attempt % TIMELINE_SLOTS} ${attempt}|${base36(this.startedAt)}|${now}|${OUTCOME_CODE[outcome]}|${this.omitted}`;
    for (const [kind, key, offset, duration, status] of this.entries) {
      const interrupted = duration === -1 && kind === KIND_CODE.step;
      text += `;${kind}${interrupted ? STATUS_CODE.interrupted : status},${offset},${interrupted ? now - offset : duration},${key}`;
    }
    return error ? text + encodeJournalError(error) : text;
  }

  private add(kind: CallKind, key: string, status: JournalStatus, replayed: boolean): Entry | undefined {
    const size = key.length + 24;
    const used = replayed ? this.usedReplayed : this.usedRun;
    if (used + size > (replayed ? MAX_REPLAY_BYTES : MAX_JOURNAL_BYTES)) {
      this.omitted++;
      return undefined;
    }
    if (replayed) this.usedReplayed += size;
    else this.usedRun += size;
    const entry: Entry = [KIND_CODE[kind], key, Date.now() - this.startedAt, -1, STATUS_CODE[status]];
    this.entries.push(entry);
    return entry;
  }
}
