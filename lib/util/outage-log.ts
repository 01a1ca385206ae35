/** What an {@link OutageLog} writes to: Nest's `Logger`, or e.g. the CLI's console pair. */
export interface OutageLogger {
  warn(message: string): void;
  log(message: string): void;
  error?(message: string): void;
}

/** First summary of a failure streak comes this long after its first line… */
const FIRST_SUMMARY_MS = 60_000;
/** …and the gap doubles after each summary, up to this. */
const MAX_SUMMARY_MS = 15 * 60_000;

/**
 * Logs a condition that repeats while something is down — a connection's reconnect attempts, a
 * worker loop's failed wakes, a heartbeat — as a handful of lines however long the outage lasts:
 * the first failure at once, then a summary (latest message, count held back) at most once a
 * minute, the gap doubling up to 15 minutes, and one line at `log` level when it is over.
 *
 * A line per failed attempt buries the logs under dozens of lines a minute; a fixed interval
 * still grows linearly with the outage. No timer: a summary is only written when
 * a failure arrives, so an idle streak costs nothing.
 */
export class OutageLog {
  private startedAt?: number;
  private lastLineAt = 0;
  private gapMs = FIRST_SUMMARY_MS;
  private held = 0;
  private total = 0;
  private logged = false;

  constructor(
    private readonly logger: OutageLogger,
    private readonly level: 'warn' | 'error' = 'warn',
  ) {}

  /** When the current streak of failures began (local clock), or undefined while all is well. */
  get since(): number | undefined {
    return this.startedAt;
  }

  /** A failure: logged if it is the first of its streak or a summary is due, else counted. */
  warn(message: string): void {
    const now = Date.now();
    this.startedAt ??= now;
    this.total++;
    if (this.logged && now - this.lastLineAt < this.gapMs) {
      this.held++;
      return;
    }
    const summary = this.logged ? ` (${this.held} similar message(s) held back; failing for ${seconds(now - this.startedAt)})` : '';
    if (this.logged) this.gapMs = Math.min(MAX_SUMMARY_MS, this.gapMs * 2);
    this.logged = true;
    this.lastLineAt = now;
    this.held = 0;
    this.write(this.level, message + summary);
  }

  /**
   * The condition is over. If the streak logged anything, `message` is logged (at `log` level)
   * with how long it lasted, so every warning has its matching all-clear; a streak nobody was
   * told of (no failure since the last recovery) ends silently.
   */
  recovered(message?: string): void {
    if (this.startedAt === undefined) return; // the common case: nothing to end
    if (this.logged && message)
      this.write('log', `${message} after ${seconds(Date.now() - (this.startedAt ?? Date.now()))} (${this.total} failure(s))`);
    this.startedAt = undefined;
    this.lastLineAt = 0;
    this.gapMs = FIRST_SUMMARY_MS;
    this.held = 0;
    this.total = 0;
    this.logged = false;
  }

  /** A logger that throws must not break the code path that reports a failure. */
  private write(level: 'warn' | 'error' | 'log', message: string): void {
    try {
      if (level === 'error' && this.logger.error) this.logger.error(message);
      else if (level === 'log') this.logger.log(message);
      else this.logger.warn(message);
    } catch {
      // ignored
    }
  }
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
