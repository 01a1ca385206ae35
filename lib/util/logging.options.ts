import { QueueConfigError } from '../errors';
import { checkOptionKeys } from './option-keys';

/** Levels a retried attempt's failure may be logged at; `false` does not log it. */
export type AttemptFailedLevel = 'warn' | 'debug' | false;

/**
 * What Sluice logs (all through Nest's `Logger`, context `'Sluice'`). Starts and stops, shutdown
 * drains, runs that failed for good, stalls recovered and Redis outages are always logged (an
 * outage as a handful of lines, however long); nothing is logged per successful run.
 */
export interface LoggingOptions {
  /**
   * A failed attempt that will be retried: `'warn'` (default), `'debug'`, or `false` for
   * nothing. A run that fails for good is a warning whatever this says.
   */
  attemptFailed?: AttemptFailedLevel;
}

export interface ResolvedLoggingOptions {
  attemptFailed: AttemptFailedLevel;
}

export function resolveLoggingOptions(logging: LoggingOptions | undefined, where = 'logging'): ResolvedLoggingOptions {
  if (logging !== undefined && (logging === null || typeof logging !== 'object')) {
    throw new QueueConfigError(`logging must be an object, got ${String(logging)}`);
  }
  checkOptionKeys(logging, ['attemptFailed'], where);
  const attemptFailed = logging?.attemptFailed ?? 'warn';
  if (attemptFailed !== 'warn' && attemptFailed !== 'debug' && attemptFailed !== false) {
    throw new QueueConfigError(`logging.attemptFailed must be 'warn', 'debug' or false, got ${JSON.stringify(attemptFailed)}`);
  }
  return { attemptFailed };
}
