import type { Logger } from '@nestjs/common';

/**
 * Logs a recurring warning at most once per interval, with the count of repeats it held back:
 * during an outage every reconnect attempt fails, and a line per attempt would bury the logs.
 */
export class ThrottledLog {
  private lastAt = 0;
  private suppressed = 0;

  constructor(
    private readonly logger: Pick<Logger, 'warn'>,
    private readonly intervalMs = 30_000,
  ) {}

  warn(message: string): void {
    const now = Date.now();
    if (now - this.lastAt < this.intervalMs) {
      this.suppressed++;
      return;
    }
    const repeats = this.suppressed > 0 ? ` (${this.suppressed} similar message(s) suppressed)` : '';
    this.lastAt = now;
    this.suppressed = 0;
    this.logger.warn(message + repeats);
  }

  /** The condition is over: the next warning is logged at once. */
  reset(): void {
    this.lastAt = 0;
    this.suppressed = 0;
  }
}
