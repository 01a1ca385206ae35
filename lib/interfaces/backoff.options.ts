/** Exponential backoff between attempts: `delayMs * factor^(failures-1)`, capped, with jitter. */
export interface BackoffOptions {
  /** Delay before the first retry, in ms. */
  delayMs: number;
  /** Growth per failure (default 2). */
  factor?: number;
  /** Upper bound of one delay (default 1 hour). */
  maxDelayMs?: number;
}

/** The keys of {@link BackoffOptions}: any other is refused (see checkOptionKeys). */
export const BACKOFF_OPTIONS: readonly string[] = ['delayMs', 'factor', 'maxDelayMs'];
