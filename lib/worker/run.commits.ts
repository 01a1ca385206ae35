import type { LocalWaits } from '../interfaces/local.waits';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import type { CallOptions } from '../redis/redis.link';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import { newCallId } from '../redis/commands/call-id';
import type { Claim } from '../redis/commands/claim.reply';
import { commitPolicy } from '../redis/commands/commit.policy';
import { complete } from '../redis/commands/complete.command';
import { saveSteps } from '../redis/commands/save-steps.command';
import { COMMIT_BATCH_CAP } from './run.launcher';
import { TickBatcher } from './tick.batcher';
import type { OwnCommitFailures } from '../execution/commit.failures';
import type { ShortClaimPark } from './park.announcer';

/** Asked of the worker loop when runs complete: how many runs to claim into the freed slots. */
export interface Refill {
  /** The call's place in the order claims are launched in (see ClaimSequencer). */
  ticket: number;
  count: number;
  workflows: string[];
  /**
   * The worker's park announcement (see lua/park.lua), when it is not parked already: a refill
   * that comes up short announces it, for `ttlMs`, in the same call, unless a rate limit held runs
   * back (the reply says which; see lua/complete.lua).
   */
  park?: ShortClaimPark;
}

/**
 * One token-checked write of a worker: a finished run, or a finished step (with the attempt's
 * record of its own commit failures, told of a connection error that fails the write).
 */
type Commit = { claim: Claim; encoded: string } & (
  { kind: 'complete'; journal: string } | { kind: 'step'; key: string; failures?: OwnCommitFailures }
);

/** The shortest result retention with which complete calls name the process's own inbox (see RunCommits). */
export const LOCAL_WAITS_MIN_TTL_MS = 60_000;

/** What RunCommits asks of its worker, each optional (tests leave them out). */
export interface CommitHooks {
  /** How many runs the worker holds (running, held ready, committing): see TickBatcher's `full`. */
  holding?: () => number;
  /** Added to complete's retry flag, asked per call: `CLAIM_EXTRAS` while telemetry records, else 0. */
  claimExtras?: () => number;
  /** This process's run() waits: told of the runs each call completes, which Redis then does not announce to them. */
  localWaits?: LocalWaits;
}

/**
 * The worker's token-checked writes, batched per event-loop turn: step results and completions
 * (which also claim runs for the slots they free) that happen in the same turn share one script
 * call — the Lua call overhead is most of Redis's cost per run, and each call is a round trip
 * the runs wait on. A turn with no completion uses the leaner save-steps script.
 */
export class RunCommits {
  private readonly batcher: TickBatcher<Commit, boolean>;
  private readonly policy: CallOptions;
  /** The inbox complete calls name for Redis not to announce there (see LocalWaits), if any. */
  private readonly localInbox?: string;

  constructor(
    private readonly scripts: LuaScripts,
    private readonly keys: RedisKeys,
    private readonly options: ResolvedQueueOptions,
    /**
     * Promises slots to the refill; `settle` hands back the claims, the park announcement the
     * call carried, if any, and whether it made it.
     */
    private readonly refill: {
      take(runs: number): Refill;
      settle(ticket: number, claims: Claim[], park: ShortClaimPark | undefined, parked: boolean): void;
    },
    private readonly worker: CommitHooks = {},
  ) {
    this.batcher = new TickBatcher(
      (items) => this.flush(items),
      COMMIT_BATCH_CAP,
      (pending) => {
        // Full when every run the worker holds waits on this batch: waiting for the turn's end would add none.
        const holding = this.worker.holding?.() ?? Infinity;
        return pending.length >= holding && new Set(pending.map(({ item }) => item.claim.id)).size >= holding;
      },
    );
    this.policy = commitPolicy(options);
    // Results kept this briefly could be gone before a waiter whose announcement was skipped
    // re-reads the record after a lost reply: those are announced as any other.
    if (options.defaults.resultTtlMs >= LOCAL_WAITS_MIN_TTL_MS) this.localInbox = worker.localWaits?.id;
  }

  /**
   * Resolves true once the result is committed, false if the lease was lost (nothing written).
   * `journal` is the attempt's (AttemptJournal.encode), stored with the result.
   */
  complete(claim: Claim, encoded: string, journal = ''): Promise<boolean> {
    return this.batcher.add({ kind: 'complete', claim, encoded, journal });
  }

  /**
   * Resolves true once the step result is persisted, false if the lease was lost (nothing written).
   * A connection error that fails it is noted in `failures` (see OwnCommitFailures) before it rejects.
   */
  saveStep(claim: Claim, key: string, encoded: string, failures?: OwnCommitFailures): Promise<boolean> {
    return this.batcher.add({ kind: 'step', claim, key, encoded, failures });
  }

  /** How many completions wait for this turn's call (which refills slots: see Refill). */
  completing(): number {
    return this.batcher.count((item) => item.kind === 'complete');
  }

  private async flush(items: Commit[]): Promise<boolean[]> {
    try {
      return await this.send(items);
    } catch (error) {
      for (const item of items) if (item.kind === 'step') item.failures?.note(error);
      // The call may have landed without announcing these runs to this process's waits (see LocalWaits).
      this.worker.localWaits?.unsure(items.filter((item) => item.kind === 'complete').map((item) => item.claim.id));
      throw error;
    }
  }

  private async send(items: Commit[]): Promise<boolean[]> {
    const steps = items.filter((item): item is Commit & { kind: 'step' } => item.kind === 'step');
    const completions = items.filter((item): item is Commit & { kind: 'complete' } => item.kind === 'complete');
    if (completions.length === 0) return saveSteps(this.scripts, this.keys, steps, this.policy);
    const { ticket, count, workflows, park } = this.refill.take(completions.length);
    let claims: Claim[] = [];
    let parked = false;
    try {
      const { options } = this;
      const request = {
        callId: newCallId(),
        resultTtlMs: options.defaults.resultTtlMs,
        claim: count,
        lockMs: options.worker.lockMs,
        extras: this.worker.claimExtras?.() ?? 0,
        localInbox: this.localInbox,
        park,
        workflows,
        steps,
        completions,
      };
      const reply = await complete(this.scripts, this.keys, request, this.policy);
      claims = reply.claims;
      parked = reply.parked;
      // Before anything else this reply sets off: a run() waiting in this process is told first.
      const local = this.worker.localWaits;
      if (local) completions.forEach(({ claim, encoded }, i) => reply.completed[i] && local.completed(claim.id, claim.workflow, encoded));
      let nextStep = 0;
      let nextComplete = 0;
      return items.map((item) => (item.kind === 'step' ? reply.saved[nextStep++] : reply.completed[nextComplete++]));
    } finally {
      this.refill.settle(ticket, claims, park, parked);
    }
  }
}
