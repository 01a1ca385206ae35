import type { CallKind } from './step.recorder';

/** How a call of an attempt ended, as the journal stores it (one letter each, see {@link AttemptJournal}). */
export type JournalStatus = 'ok' | 'failed' | 'replayed' | 'waiting';

/** How an attempt ended, as its journal stores it ('failed': this attempt failed, whether or not the run retries). */
export type JournalOutcome = 'completed' | 'failed' | 'suspended';

/** Most bytes of call entries one attempt's journal keeps; later calls are only counted (`m`). */
export const MAX_JOURNAL_BYTES = 4096;

const STATUS_CODE: Record<JournalStatus, string> = { ok: 'o', failed: 'f', replayed: 'r', waiting: 'w' };
const KIND_CODE: Record<CallKind, string> = { step: 's', sleep: 'z', signal: 'g', event: 'e', invoke: 'i' };

/** One call as stored: kind, memo key, start (ms after the attempt's start), duration (ms), status. */
type Entry = [string, string, number, number, string];

/**
 * When each top-level call of one attempt ran and how it ended: what the dashboard draws as the
 * run's step timeline. Kept in memory (a push per call, on the worker's clock) and stored once, with
 * the attempt's outcome, in the run hash field `tl:<attempt>` by the script that commits it
 * (complete, fail, suspend): no Redis command of its own. An attempt that never commits (its
 * worker died, its lease was lost) leaves no journal.
 */
export class AttemptJournal {
  private readonly startedAt = Date.now();
  private readonly entries: Entry[] = [];
  private bytes = 0;
  private omitted = 0;

  /** A call that starts now; the function returned ends it (calls the journal has no room for are only counted). */
  begin(kind: CallKind, key: string): (status: JournalStatus) => void {
    const entry = this.add(kind, key, 'waiting');
    if (!entry) return () => undefined;
    return (status) => {
      entry[3] = Date.now() - this.startedAt - entry[2];
      entry[4] = STATUS_CODE[status];
    };
  }

  /** A call answered from the memo (a replayed step or wait). */
  replayed(kind: CallKind, key: string): void {
    const entry = this.add(kind, key, 'replayed');
    if (entry) entry[3] = 0;
  }

  /** The journal as the committing script stores it: `<attempt> <json>` (see hsetRun in lua/includes/common.lua). */
  encode(attempt: number, outcome: JournalOutcome): string {
    const json = JSON.stringify({ s: this.startedAt, e: Date.now(), o: outcome, c: this.entries, ...(this.omitted > 0 && { m: this.omitted }) });
    return `${attempt} ${json}`;
  }

  private add(kind: CallKind, key: string, status: JournalStatus): Entry | undefined {
    const size = key.length + 24;
    if (this.bytes + size > MAX_JOURNAL_BYTES) {
      this.omitted++;
      return undefined;
    }
    this.bytes += size;
    const entry: Entry = [KIND_CODE[kind], key, Date.now() - this.startedAt, -1, STATUS_CODE[status]];
    this.entries.push(entry);
    return entry;
  }
}
