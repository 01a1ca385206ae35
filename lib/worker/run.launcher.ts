import { LeaseUnconfirmedError } from '../errors';
import type { Claim } from '../redis/commands/claim.reply';
import { LazyAbort } from '../execution/lazy.abort';
import type { ActiveRun, ActiveRuns } from './active-runs';

/**
 * How long the last run held ready may expect to wait for its slot: the worker holds about as
 * many runs as its slots finish in this time (at the average run length), so a held run starts
 * sooner than another worker could have claimed and started it. Runs longer than this hold none.
 */
export const HOLD_BUDGET_MS = 5;
/**
 * Most runs held ready: runs that finish one after the other while a commit is in flight commit
 * together in the next call (up to 32, see RunCommits).
 */
export const MAX_HELD = 32;
/**
 * Most commits one script call carries (RunCommits). Short calls keep Redis responsive, and several
 * calls in flight let Node prepare one batch while Redis runs the previous. 32: half the calls of
 * 16, the fastest drain at concurrency 50 in bench (8, 48 and 64 are slower). A worker holding runs
 * keeps whole batches of them in flight (see capacity).
 */
export const COMMIT_BATCH_CAP = 32;
/** A held run not started by then goes back to the queue (the runs became long): another worker may take it. */
export const HELD_MAX_MS = 1_000;
/**
 * Most claimed runs a worker of `concurrency` holds, executing or held ready: its slots and
 * {@link MAX_HELD}, rounded up to whole commit batches. 33 (one slot and 32 held) commit as 32 + 1,
 * and the batch of one keeps going round with a whole call's overhead; 64 go round as two full ones.
 */
export function mostInFlight(concurrency: number): number {
  return Math.ceil((concurrency + MAX_HELD) / COMMIT_BATCH_CAP) * COMMIT_BATCH_CAP;
}

/**
 * Weight of the latest run in the running average of run lengths, once it has seen 10 runs;
 * before, each of the runs so far weighs the same (their plain mean), so a worker's first run,
 * slowed by cold code, does not hold the average up for the next twenty.
 */
const AVERAGE_WEIGHT = 0.1;

/** What the launcher is built from (see WorkerLoop). */
export interface LauncherParts {
  concurrency: number;
  active: ActiveRuns;
  /** Executes one claim to its committed outcome; `codeDone` is called once its code has finished, before the commit. */
  execute(claim: Claim, abort: LazyAbort, codeDone: () => void): Promise<void>;
  /** Returns unstarted claims to the queue. */
  handBack(claims: Claim[]): void;
  /** A run whose execution failed outside its attempt (its lease will lapse). */
  failed(claim: Claim, error: Error): void;
  stopping(): boolean;
}

interface HeldRun {
  claim: Claim;
  run: ActiveRun;
  heldAt: number;
}

/**
 * Starts claimed runs within the worker's concurrency and, while runs are short, holds a few
 * more claimed runs ready (see {@link HOLD_BUDGET_MS}). A run's slot frees when its code
 * finishes, before its commit is sent: the next run starts from the held ones at once, and the
 * commit call claims its replacement while that run executes, so Node and Redis work side by
 * side instead of in turn. Long runs hold nothing: a run never waits long behind another one
 * while some other worker is free. Held runs are leased (the heartbeat renews them), and go back
 * to the queue at stop.
 */
export class RunLauncher {
  private executing = 0;
  private held: HeldRun[] = [];
  private averageMs = Infinity;
  /** Runs the average is taken over so far (counted up to 1 / AVERAGE_WEIGHT). */
  private averaged = 0;
  /**
   * Claims in a row without a group: the worker holds runs only after `concurrency` of them, so
   * grouped runs are not held — runs held before another group's first run arrived would start
   * ahead of it, past its turn of the round-robin.
   */
  private ungroupedInRow = 0;
  private staleCheck?: NodeJS.Timeout;

  constructor(private readonly parts: LauncherParts) {}

  /** How many claimed runs this worker holds at most: those executing, and those held ready. */
  capacity(): number {
    const { concurrency } = this.parts;
    if (this.averageMs === Infinity || this.ungroupedInRow < concurrency) return concurrency;
    const held = Math.min(MAX_HELD, Math.floor((concurrency * HOLD_BUDGET_MS) / Math.max(this.averageMs, 0.01)));
    return held < MAX_HELD ? concurrency + held : mostInFlight(concurrency);
  }

  /** Takes a claimed run: it starts now if a slot is free, else it is held ready. */
  launch(claim: Claim): ActiveRun {
    const run = { id: claim.id, token: claim.token, abort: new LazyAbort(), leaseConfirmedAt: Date.now() };
    this.parts.active.add(run);
    this.ungroupedInRow = claim.group === undefined ? this.ungroupedInRow + 1 : 0;
    if (this.executing < this.parts.concurrency) this.start(claim, run);
    else this.hold({ claim, run, heldAt: Date.now() });
    return run;
  }

  /** At stop: the held runs go back to the queue unstarted. */
  handBackHeld(): void {
    this.handBack(this.held.splice(0));
  }

  private start(claim: Claim, run: ActiveRun): void {
    this.executing++;
    const startedAt = Date.now();
    let done = false;
    const codeDone = () => {
      if (done) return;
      done = true;
      this.executing--;
      const ms = Date.now() - startedAt;
      if (this.averaged * AVERAGE_WEIGHT < 1) this.averaged++;
      this.averageMs = this.averaged === 1 ? ms : this.averageMs + Math.max(AVERAGE_WEIGHT, 1 / this.averaged) * (ms - this.averageMs);
      this.startHeld();
    };
    const finish = () => {
      codeDone();
      this.parts.active.delete(run.id, run.token);
    };
    const failed = (error: Error) => {
      try {
        this.parts.failed(claim, error);
      } finally {
        finish();
      }
    };
    // One reaction on the run's promise, not an async wrapper nor a .catch().finally() chain:
    // this runs per run, and each promise and async frame is allocated and collected.
    let executed: Promise<void>;
    try {
      executed = this.parts.execute(claim, run.abort, codeDone);
    } catch (error) {
      return failed(error as Error);
    }
    executed.then(finish, failed);
  }

  private startHeld(): void {
    while (this.executing < this.parts.concurrency && this.held.length > 0 && !this.parts.stopping()) {
      const held = this.held.shift()!;
      const { claim, run } = held;
      // No beat could renew its lease for its length (Redis unreachable, see LeaseHeartbeat): back
      // to the queue, as a started attempt stopped for that goes, rather than left leased to lapse
      // and be counted a stall.
      if (run.abort.reason instanceof LeaseUnconfirmedError) this.handBack([held]);
      // Cancelled while held (its record is final already), or claimed again by this process.
      else if (run.abort.aborted || this.parts.active.get(run.id) !== run) this.parts.active.delete(run.id, run.token);
      else this.start(claim, run);
    }
  }

  private hold(held: HeldRun): void {
    this.held.push(held);
    this.staleCheck ??= setTimeout(() => this.handBackStale(), HELD_MAX_MS).unref();
  }

  /** Runs held past {@link HELD_MAX_MS} (the runs ahead of them are long) go back to the queue. */
  private handBackStale(): void {
    this.staleCheck = undefined;
    const cutoff = Date.now() - HELD_MAX_MS;
    const stale = this.held.filter((h) => h.heldAt <= cutoff);
    this.held = this.held.filter((h) => h.heldAt > cutoff);
    this.handBack(stale);
    if (this.held.length > 0) this.staleCheck = setTimeout(() => this.handBackStale(), HELD_MAX_MS).unref();
  }

  private handBack(runs: HeldRun[]): void {
    if (runs.length === 0) return;
    for (const { run } of runs) this.parts.active.delete(run.id, run.token);
    this.parts.handBack(runs.map((h) => h.claim));
  }
}
