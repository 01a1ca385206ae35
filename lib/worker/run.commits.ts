import type { ResolvedQueueOptions } from '../queue.options';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import { Claim, parseClaimReply } from './claim';
import { TickBatcher } from './tick.batcher';

/** Most runs or steps one commit call carries: Lua is single-threaded, keep each call short. */
const COMMIT_BATCH_CAP = 16;

/** Asked of the worker loop when runs complete: how many runs to claim into the freed slots. */
export interface Refill {
  count: number;
  workflows: string[];
}

export interface CompleteRequest {
  claim: Claim;
  encoded: string;
}

/**
 * The worker's token-checked writes, batched per event-loop turn: step results, and completions
 * (which also claim runs for the slots they free). One script call per batch instead of one per
 * run — the Lua call overhead is most of Redis's cost per run.
 */
export class RunCommits {
  private readonly completes: TickBatcher<CompleteRequest, boolean>;
  private readonly steps: TickBatcher<{ claim: Claim; key: string; encoded: string }, boolean>;

  constructor(
    private readonly scripts: LuaScripts,
    private readonly keys: RedisKeys,
    private readonly options: ResolvedQueueOptions,
    /** Promises slots to the refill; `settle` hands back the claims and the promise. */
    private readonly refill: { take(runs: number): Refill; settle(claims: Claim[], promised: number): void },
  ) {
    this.completes = new TickBatcher((items) => this.flushCompletes(items), COMMIT_BATCH_CAP);
    this.steps = new TickBatcher((items) => this.flushSteps(items), COMMIT_BATCH_CAP);
  }

  /** Resolves true once the result is committed, false if the lease was lost (nothing written). */
  complete(request: CompleteRequest): Promise<boolean> {
    return this.completes.add(request);
  }

  /** Resolves true once the step result is persisted, false if the lease was lost (nothing written). */
  saveStep(claim: Claim, key: string, encoded: string): Promise<boolean> {
    return this.steps.add({ claim, key, encoded });
  }

  private async flushCompletes(items: CompleteRequest[]): Promise<boolean[]> {
    const { count, workflows } = this.refill.take(items.length);
    let claims: Claim[] = [];
    try {
      const reply = await this.scripts.run<unknown[]>('complete', [this.keys.leases, this.keys.limits, this.keys.seq], [
        this.keys.base, this.options.defaults.resultTtlMs, count, this.options.worker.lockMs, workflows.length, ...workflows,
        ...items.flatMap(({ claim, encoded }) => [claim.id, claim.token, encoded]),
      ]);
      const parsed = parseClaimReply<number[]>(reply);
      claims = parsed.claims;
      return parsed.head.map((status) => status === 1);
    } finally {
      this.refill.settle(claims, count);
    }
  }

  private async flushSteps(items: { claim: Claim; key: string; encoded: string }[]): Promise<boolean[]> {
    const reply = await this.scripts.run<number[]>('save-steps', [this.keys.leases], [
      this.keys.base, ...items.flatMap(({ claim, key, encoded }) => [claim.id, claim.token, key, encoded]),
    ]);
    return reply.map((saved) => saved === 1);
  }
}
