import { InvalidOptionError } from '../errors';
import { Duration, toMilliseconds } from '../util/duration';

/**
 * The harness's time. Nothing in the harness sleeps: a run's `delay`/`runAt` and every retry's
 * backoff move this clock forward instead (and are reported), and schedules list their next fire
 * times after {@link now}. It never moves by itself, so a test controls it completely.
 *
 * Workflow code that reads the time itself (`Date.now()`) sees the real clock, as in production;
 * inject a clock into the workflow to fake that too.
 */
export class FakeClock {
  private nowMs: number;

  /** @param start the initial time; default: the real time when the harness was made */
  constructor(start: Date | number = Date.now()) {
    this.nowMs = toMs(start, 'clock start');
  }

  /** The fake time in ms since the epoch. */
  now(): number {
    return this.nowMs;
  }

  /** The fake time as a `Date`. */
  date(): Date {
    return new Date(this.nowMs);
  }

  /** Moves the clock forward by `duration` (ms, or e.g. `'10m'`); returns the new time in ms. */
  advance(duration: Duration): number {
    this.nowMs += toMilliseconds(duration, 'clock.advance');
    return this.nowMs;
  }

  /** Sets the clock to `time` (earlier or later). */
  set(time: Date | number): void {
    this.nowMs = toMs(time, 'clock.set');
  }
}

function toMs(time: Date | number, field: string): number {
  const ms = time instanceof Date ? time.getTime() : time;
  if (typeof ms !== 'number' || !Number.isFinite(ms))
    throw new InvalidOptionError(field, `must be a valid Date or a finite number of ms, got ${String(time)}`);
  return ms;
}
