import { RedisConnectionError, RunNotFoundError, WaitTimeoutError, WorkflowFailedError, type RunErrorInfo } from '../errors';
import { cancelledRunError } from '../errors/cancel.recorded';
import { decodeMessage } from '../redis/payload.codec';

/** What a read of the stored record says: settled with the result, or not finished yet (a failure is thrown). */
export type Outcome = { settled: true; result: unknown } | { settled: false };

/** The record a worker publishes when a run finishes (see finishRun in lua/includes/finish.lua). */
interface DoneMessage {
  v: 1;
  state: 'completed' | 'failed' | 'cancelled';
  workflow?: string;
  result?: unknown;
  error?: RunErrorInfo;
  undef?: boolean;
}

/**
 * Not a sleep standing in for an event: pub/sub is only a doorbell, and a publish sent while the
 * subscriber was reconnecting is gone. Re-reading the stored record this often bounds how long
 * such a loss can delay a waiter.
 */
export const BACKSTOP_MS = 10_000;

/** How a wait reads the stored record, and learns that its subscriber has handed over every message sent so far. */
export interface WaitReads {
  read(): Promise<Outcome>;
  deliveredSoFar(): Promise<void>;
}

/**
 * One wait in progress (see RunWaiter): settles its promise once — with the outcome a message
 * carries, one a read finds, a timeout, or an error — and then clears its timers and runs its
 * cleanups (unsubscribing). Whichever way the wait is fed, the rules are the same: the clock runs
 * from the call, but a run the first read finds finished always resolves; after the first read
 * a background re-read (after a reconnect, and every {@link BACKSTOP_MS}) only ever settles the
 * wait with an outcome, while Redis is away it fails quietly and the wait carries on.
 */
export class PendingWait {
  private done = false;
  private firstReadDone = false;
  private timedOut = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly cleanups: Array<() => void> = [];

  constructor(
    private readonly runId: string,
    private readonly timeoutMs: number | undefined,
    private readonly reads: WaitReads,
    private readonly resolve: (value: unknown) => void,
    private readonly reject: (error: unknown) => void,
  ) {
    if (timeoutMs !== undefined) {
      this.timers.push(
        setTimeout(() => {
          this.timedOut = true;
          if (this.firstReadDone) this.expire();
        }, timeoutMs),
      );
    }
  }

  /** Whether the wait has settled (nothing more is to be sent for it). */
  get settled(): boolean {
    return this.done;
  }

  /** Runs `cleanup` when the wait settles (at once if it has). */
  onSettle(cleanup: () => void): void {
    if (this.done) cleanup();
    else this.cleanups.push(cleanup);
  }

  /** Rejects the wait with `error` (a shutdown, a failed call), unless it has settled. */
  readonly fail = (error: unknown): void => this.finish(() => this.reject(error));

  /**
   * A message for this run: its announcement, which carries the outcome; anything else (a bare
   * "1" from a peer of an older build, or a reconnect notice) has the record read again.
   */
  readonly onMessage = (message: string): void => {
    const record = parseDone(message);
    if (!record) return void this.reread();
    if (record.state === 'completed') this.finish(() => this.resolve(record.undef ? undefined : record.result));
    else if (record.state === 'cancelled') this.finish(() => this.reject(cancelledRunError(this.runId, record.error)));
    else this.finish(() => this.reject(new WorkflowFailedError(this.runId, record.workflow, record.error ?? unknownError())));
  };

  /**
   * The first read is in (or, `outcome` given without a read, the run is known to exist and be
   * unfinished): settle, time out, or wait on, re-reading first after `backstopMs`.
   */
  firstRead(outcome: Outcome, backstopMs = BACKSTOP_MS): void {
    this.firstReadDone = true;
    if (outcome.settled) this.finish(() => this.resolve(outcome.result));
    else if (this.timedOut) this.expire();
    else if (!this.done) this.backstop(backstopMs);
  }

  /**
   * The first read failed (or what had to come before it). The record may have been deleted
   * (retention by count) by the very call that announced the run to this live subscription: let
   * that announcement arrive before saying "no such run".
   */
  async firstReadFailed(error: unknown): Promise<void> {
    if (error instanceof RunNotFoundError && !this.done) await this.reads.deliveredSoFar();
    this.fail(error);
  }

  /**
   * A background re-read settles the wait only with an outcome; a failed read is retried later.
   * Before the first read, "no such run" means nothing: run() may enqueue only once it listens,
   * so a re-read on a subscriber reconnect may come before the enqueue lands.
   */
  readonly reread = (): Promise<unknown> =>
    this.reads.read().then(
      (outcome) => outcome.settled && this.finish(() => this.resolve(outcome.result)),
      (error) =>
        !(error instanceof RedisConnectionError) &&
        (this.firstReadDone || !(error instanceof RunNotFoundError)) &&
        this.finish(() => this.reject(error)),
    );

  private backstop(afterMs: number): void {
    this.timers.push(setTimeout(() => void this.reread().then(() => !this.done && this.backstop(BACKSTOP_MS)), afterMs));
  }

  private expire(): void {
    this.finish(() => this.reject(new WaitTimeoutError(this.runId, this.timeoutMs!)));
  }

  private finish(settle: () => void): void {
    if (this.done) return;
    this.done = true;
    this.timers.forEach(clearTimeout);
    this.cleanups.forEach((cleanup) => cleanup());
    settle();
  }
}

function parseDone(message: string): DoneMessage | undefined {
  try {
    const record = decodeMessage<DoneMessage>(message, 'result');
    return record && typeof record === 'object' && record.v === 1 ? record : undefined;
  } catch {
    return undefined;
  }
}

export function unknownError(): RunErrorInfo {
  return { name: 'Error', message: 'unknown error' };
}
