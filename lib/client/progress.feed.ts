import { decodePayload } from '../redis/payload.codec';
import { parseProgressMessage, type ProgressMessage } from '../redis/progress.codec';

/**
 * Hands one waiter's `onProgress` the run's progress values in order, each once: first the
 * stored value its first read found, then the published ones. Every value carries its number
 * (`progressSeq`), which orders the two sources: a publish can arrive before the read's reply,
 * so publishes are held until the read is in, and anything not newer than what was handed over
 * is skipped. Later reads (after a reconnect, or the backstop) catch up on publishes that were
 * lost. Nothing is handed over once {@link stop} was called, i.e. once the wait settled.
 */
export class ProgressFeed {
  private last = 0;
  private primed = false;
  private stopped = false;
  private held: ProgressMessage[] = [];

  constructor(private readonly onProgress: (value: unknown) => void) {}

  /** A message on the progress channel (anything else, e.g. a reconnect notice, is ignored). */
  readonly onMessage = (message: string): void => {
    const record = parseProgressMessage(message);
    if (!record || this.stopped) return;
    if (!this.primed) this.held.push(record);
    else this.offer(record.seq, record.value);
  };

  /** A read of the run's record: its stored value and number (both null if none was reported). */
  read(encoded: string | null | undefined, seq: string | null | undefined): void {
    if (this.stopped) return;
    if (encoded && seq) this.offer(Number(seq), decodePayload(encoded));
    if (this.primed) return;
    this.primed = true;
    const held = this.held;
    this.held = [];
    for (const record of held) this.offer(record.seq, record.value);
  }

  stop(): void {
    this.stopped = true;
    this.held = [];
  }

  private offer(seq: number, value: unknown): void {
    if (this.stopped || !(seq > this.last)) return;
    this.last = seq;
    try {
      const returned: unknown = this.onProgress(value);
      // An async callback's rejection is the caller's; it must not surface as an unhandled rejection.
      if (returned && typeof (returned as PromiseLike<unknown>).then === 'function')
        (returned as Promise<unknown>).then(undefined, () => undefined);
    } catch {
      // A throwing callback must not break the wait: progress is advisory.
    }
  }
}
