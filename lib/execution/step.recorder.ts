import { InvalidNameError, LeaseLostError, StepMemoLimitError } from '../errors';
import { DeterminismGuard } from './determinism.guard';
import { decodePayload, encodePayload } from '../redis/payload.codec';
import { checkId } from '../util/names';
import { stepScope, type StepRunner } from '../workflow/run.scope';
import type { Stored } from '../workflow/payload.types';
import { resolveStepOptions, type ResolvedStepOptions, type StepCallOptions, type StepFn } from '../workflow/step.options';
import type { StepObserver } from './step.observer';
import { LazyAbort } from './lazy.abort';
import { AttemptGuard } from './attempt.guard';
import { runStepTries } from './step.tries';
import { AttemptJournal, type CallKind } from './attempt.journal';
import { DEFAULT_MAX_MEMO_BYTES } from '../interfaces/payload.limits';

/** Persists one step result under the run's lease; resolves false if the lease is gone. */
export type PersistStep = (key: string, encoded: string) => Promise<boolean>;

/**
 * A top-level call's place in the run: its memo key `<name>#<occurrence>`, and its position entry
 * — memo field `@<position>` (never a memo key: those end in `#<digits>`) holding
 * `<kind>:<key>` — which the determinism guard compares on every replay. Position entries are
 * written only with a wait (lua/suspend.lua), for every call the attempt made up to it: they
 * matter only before a wait, so a run that never waits pays nothing for them.
 */
export interface Placed {
  key: string;
  field: string;
  value: string;
}

/** A {@link Placed} call whose position entry is spelled out only when a wait writes it (most calls never are). */
class PlacedCall implements Placed {
  constructor(
    private readonly kind: CallKind,
    readonly key: string,
    private readonly position: number,
  ) {}

  get field(): string {
    return `@${this.position}`;
  }

  get value(): string {
    return `${this.kind}:${this.key}`;
  }
}

/**
 * Memoizes the steps of one run attempt. A step's key is its name plus its occurrence in this
 * attempt (`charge#1`, `charge#2`…), so a step called in a loop memoizes each call. Reads come
 * from the memo shipped with the claim; each executed step costs one token-checked write, done
 * before the step returns. A step called inside another step's `fn` is not a step of its own:
 * it runs plainly and its effect is covered by the parent's memo entry — its options (time
 * limit, tries) are ignored, the parent's govern it, and its `fn` gets the parent's context.
 */
/** Step names the memo keeps for position entries and waits (see Placed and lib/execution/run.waits.ts). */
const RESERVED_STEP_NAME = /^(@|signal:|event:|invoke:)/;

/** Whether a memo field is a position entry (see {@link Placed}) rather than a step's result. */
export function isPositionField(key: string): boolean {
  return key.startsWith('@');
}

/** Checks a step call's arguments as `ctx.step` does (its typed errors), and resolves its options. */
export function checkStepCall(name: string, fn: unknown, options: StepCallOptions | undefined): ResolvedStepOptions | undefined {
  checkId(name, 'step name');
  if (RESERVED_STEP_NAME.test(name))
    throw new InvalidNameError(
      'step name',
      `"${name}" starts with a prefix the waits' memo keys use ('@', 'signal:', 'event:', 'invoke:')`,
    );
  if (typeof fn !== 'function') throw new TypeError(`ctx.step("${name}", fn): fn must be a function`);
  return resolveStepOptions(options, `ctx.step("${name}") options`);
}

export class StepRecorder implements StepRunner {
  /**
   * Made on first use, as the executing set and the determinism guard are: a run that makes no
   * call pays for the recorder alone (its maps were a fifth of an attempt's allocations).
   */
  private occurrences?: Map<string, number>;
  /** This attempt's top-level calls, in the order they were made (see {@link place}). */
  private readonly calls: Placed[] = [];
  /** Calls before this index have their position entries in the memo (see {@link unrecordedPositions}). */
  private positionsWritten = 0;
  /** Only for a memo that holds entries: a fresh run has no recorded call to follow. */
  private readonly determinism?: DeterminismGuard;
  /** Steps executing now: a wait lets them land before the run gives up its lease. */
  private executing?: Set<Promise<unknown>>;
  /**
   * Set by a wait being committed (lib/execution/run.waits.ts): a step executed meanwhile first
   * waits for it. It opens if the wait ended at once and never if the run suspended: a step
   * started then would run again after the wait, and its result could not be saved anyway.
   */
  gate?: Promise<void>;
  /** Bytes of the memo as persisted so far, including writes in flight (reserved before the write). */
  private memoBytes: number;
  /** When this attempt's calls ran and how they ended, stored with its outcome (the dashboard's timeline). */
  readonly journal = new AttemptJournal();

  constructor(
    private readonly runId: string,
    /** The memo as claimed; written into only if it holds entries (an empty one may be shared: see {@link write}). */
    private memo: Map<string, string>,
    private readonly persist: PersistStep,
    private readonly maxPayloadBytes: number,
    private readonly maxMemoBytes: number = DEFAULT_MAX_MEMO_BYTES,
    /** The attempt's telemetry (spans for executed steps, events for replays); only with it on. */
    private readonly observer?: StepObserver,
    /** The attempt's signal and time limits (step timeouts end the attempt through it). */
    private readonly guard: AttemptGuard = new AttemptGuard(runId, new LazyAbort()),
  ) {
    this.memoBytes = 0;
    for (const [key, value] of memo) this.memoBytes += entryBytes(key, value);
    if (memo.size > 0) this.determinism = new DeterminismGuard(runId, memo);
  }

  /**
   * Not an async function: a step that executes returns the promise of its execution itself, one
   * async function and three promises less per step than an async wrapper (errors thrown before
   * it starts still reject the returned promise, never throw).
   */
  step<T>(name: string, fn: StepFn<T>, options?: StepCallOptions): Promise<Stored<T>> {
    try {
      const resolved = checkStepCall(name, fn, options);
      // Nested in another step of this run: part of the parent. Numbering it would make the
      // occurrence numbers depend on whether the parent executed or was replayed; its own limit
      // and tries would multiply the parent's. (Typed as the round trip although returned as is:
      // a call site cannot know it is nested.)
      const frame = stepScope.getStore();
      if (frame?.runner === this) return Promise.resolve(fn(frame.context) as unknown as Stored<T>);

      const placed = this.place('step', name);
      const saved = this.memo.get(placed.key);
      if (saved !== undefined) {
        this.observer?.replayed(name, placed.key);
        this.journal.replayed('step', placed.key);
        return Promise.resolve(decodePayload<Stored<T>>(saved));
      }
      if (this.gate) return this.startAfterGate(this.gate, name, placed, fn, resolved);
      return this.start(name, placed, fn, resolved);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** A wait is being committed: the step starts once its gate opens (see {@link gate}). */
  private async startAfterGate<T>(
    gate: Promise<void>,
    name: string,
    placed: Placed,
    fn: StepFn<T>,
    resolved: ResolvedStepOptions | undefined,
  ): Promise<Stored<T>> {
    await gate;
    return await this.start(name, placed, fn, resolved);
  }

  /** Executes the step now, tracked among the executing ones until it settles. */
  private start<T>(name: string, placed: Placed, fn: StepFn<T>, resolved: ResolvedStepOptions | undefined): Promise<Stored<T>> {
    // An attempt that is over (time limit, cancel, lost lease, shutdown) starts no new side effect,
    // even when its code ignored its signal and carries on in the background.
    if (this.guard.abort.aborted) return Promise.reject(this.guard.abort.reason);
    const executing = this.observer
      ? this.observer.executed(name, placed.key, () => this.execute(placed, fn, resolved))
      : this.execute(placed, fn, resolved);
    const running = (this.executing ??= new Set());
    running.add(executing);
    const forget = () => running.delete(executing);
    executing.then(forget, forget);
    return executing;
  }

  /** The occurrence number the next top-level call of `name` gets (see {@link place}). */
  nextOccurrence(name: string): number {
    return (this.occurrences?.get(name) ?? 0) + 1;
  }

  /**
   * Numbers a top-level call: its occurrence among calls of its name and its position among all
   * top-level calls, both taken when it is called. On replay, a call that does not follow the
   * recorded ones (see {@link DeterminismGuard}) is a `NonDeterminismError`: it ends the attempt
   * (the run fails without retry), even if the code catches it.
   */
  place(kind: CallKind, name: string): Placed {
    const occurrence = this.nextOccurrence(name);
    (this.occurrences ??= new Map()).set(name, occurrence);
    const key = `${name}#${occurrence}`;
    const position = this.calls.length;
    try {
      this.determinism?.check(kind, key, position);
    } catch (error) {
      this.guard.expire(error as Error);
      throw error;
    }
    const placed = new PlacedCall(kind, key, position);
    this.calls.push(placed);
    return placed;
  }

  /**
   * The position entries of this attempt's calls so far that the memo does not hold as they are:
   * what a wait writes. Only the calls made since the last wait are looked at (amortised O(1) per
   * call, however long the run).
   */
  unrecordedPositions(): { positions: Placed[]; upTo: number } {
    const upTo = this.calls.length;
    return {
      positions: this.calls.slice(this.positionsWritten, upTo).filter((placed) => this.memo.get(placed.field) !== placed.value),
      upTo,
    };
  }

  /** A wait's commit wrote the position entries of the calls before `upTo` (see {@link unrecordedPositions}). */
  positionsRecorded({ positions, upTo }: { positions: Placed[]; upTo: number }): void {
    for (const { field, value } of positions) this.remember(field, value);
    this.positionsWritten = Math.max(this.positionsWritten, upTo);
  }

  /** A memo entry: a step's encoded result, or a wait's outcome envelope. */
  recorded(key: string): string | undefined {
    return this.memo.get(key);
  }

  /** Adds what a wait's commit wrote (its outcome, position entries) to this attempt's memo. */
  remember(key: string, value: string): void {
    if (!this.memo.has(key)) this.memoBytes += entryBytes(key, value);
    this.write(key, value);
  }

  /**
   * Bytes the memo may still take: what a wait's commit may write — its position entries first,
   * then its outcomes — which the script that writes them checks (see lua/suspend.lua).
   */
  room(): number {
    return Math.max(0, this.maxMemoBytes - this.memoBytes);
  }

  /** The error of a wait whose outcome or position entries (`bytes`, keys included) did not fit in the memo's budget. */
  overBudget(key: string, bytes: number): StepMemoLimitError {
    return new StepMemoLimitError(this.runId, key, bytes, this.memoBytes + bytes, this.maxMemoBytes);
  }

  /** Resolves once every step executing now has settled (landed, or failed): true if one failed. */
  async settled(): Promise<boolean> {
    let failed = false;
    while (this.executing && this.executing.size > 0) {
      const outcomes = await Promise.allSettled([...this.executing]);
      failed ||= outcomes.some((outcome) => outcome.status === 'rejected');
    }
    return failed;
  }

  /** Executes a step (its tries, see runStepTries) and persists its result before handing it back. */
  private async execute<T>(placed: Placed, fn: StepFn<T>, options: ResolvedStepOptions | undefined): Promise<Stored<T>> {
    const end = this.journal.begin('step', placed.key);
    let encoded: string;
    try {
      const value = await runStepTries(placed.key, options, this.guard, (context) => stepScope.run({ runner: this, context }, fn, context));
      encoded = encodePayload(value, `step "${placed.key}" result`, this.maxPayloadBytes);
      // The write, here rather than in a method of its own: one async function less per step.
      const bytes = this.reserve(placed.key, encoded);
      if (!(await this.persist(placed.key, encoded))) {
        this.memoBytes -= bytes;
        throw new LeaseLostError(this.runId);
      }
      this.write(placed.key, encoded);
    } catch (error) {
      end('failed');
      throw error;
    }
    end('ok');
    // Hand back the decoded copy, so the first attempt sees exactly what a replay would.
    return decodePayload<Stored<T>>(encoded);
  }

  /**
   * Adds an entry to the memo. An empty memo as claimed is never written into but replaced: claims
   * of fresh runs share one empty map (see parseClaim), which spares a map per run.
   */
  private write(key: string, value: string): void {
    if (this.memo.size === 0) this.memo = new Map();
    this.memo.set(key, value);
  }

  /**
   * Takes a memo entry's bytes from the run's memo budget before it is written (the caller gives
   * them back if the lease was lost), or throws having taken nothing: reserved before the write
   * is awaited, so steps running in parallel can't together overshoot. A write that throws stays
   * counted: it may have landed before the error reached us.
   */
  private reserve(key: string, encoded: string): number {
    const bytes = entryBytes(key, encoded);
    if (this.memoBytes + bytes > this.maxMemoBytes) {
      throw new StepMemoLimitError(this.runId, key, bytes, this.memoBytes + bytes, this.maxMemoBytes);
    }
    this.memoBytes += bytes;
    return bytes;
  }
}

/** One memo entry's share of the budget: what it adds to the claim reply that ships the memo. */
export function entryBytes(key: string, encoded: string): number {
  return Buffer.byteLength(key) + Buffer.byteLength(encoded);
}
