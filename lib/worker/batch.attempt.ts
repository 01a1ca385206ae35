import type { WorkflowDefinition } from '../discovery/workflow.registry';
import { BatchOutputError } from '../errors';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { batchMembers, type BatchMembers } from '../redis/commands/batch-members.command';
import type { Claim } from '../redis/commands/claim.reply';
import { commitPolicy } from '../redis/commands/commit.policy';
import type { FailRequest, FailOutcome } from '../redis/commands/fail.command';
import { finishBatch } from '../redis/commands/finish-batch.command';
import type { LuaScripts } from '../redis/lua.scripts';
import { decodePayload, encodePayload } from '../redis/payload.codec';
import type { RedisKeys } from '../redis/redis.keys';
import { batchContext } from '../workflow/batch.context';
import type { RunContext, WorkflowInstance } from '../workflow/workflow.types';

/** What a batch attempt needs of its worker. */
export interface BatchDeps {
  scripts: LuaScripts;
  keys: RedisKeys;
  options: ResolvedQueueOptions;
}

/**
 * One attempt of a batch run (docs/batches.md), for RunExecutor: its members read first (one
 * call), then the workflow's `run` called with their inputs through an instance of its own (so
 * the attempt runs like any run's: memoized steps, waits, time limits, lease), and its outcome
 * committed with the members' in one call (lua/finish-batch.lua) instead of complete or fail.
 */
export class BatchAttempt {
  /** What the attempt runner calls: the workflow's `run` with the members' inputs, its result checked. */
  readonly instance: WorkflowInstance;

  private constructor(
    private readonly deps: BatchDeps,
    private readonly claim: Claim,
    private readonly members: BatchMembers,
    definition: WorkflowDefinition,
  ) {
    const workflow = definition.batch!.of;
    const target = definition.instance;
    const batch = { id: claim.id, memberIds: members.ids };
    // The workflow's own instance as prototype: the run scope (memoized @Step methods) is entered
    // for it as for a plain run (see needsRunScope).
    this.instance = Object.create(target, {
      run: {
        value: async (_input: unknown, ctx: RunContext) => {
          // Every member was cancelled while the batch waited: nothing to run.
          if (members.ids.length === 0) return [];
          const inputs = members.inputs.map((input) => decodePayload(input));
          const results: unknown = await target.run(inputs, batchContext(ctx, batch));
          if (!Array.isArray(results)) throw new BatchOutputError(workflow, `got ${results === null ? 'null' : typeof results}`);
          if (results.length !== inputs.length)
            throw new BatchOutputError(workflow, `got ${results.length} result(s) for ${inputs.length} input(s)`);
          return results as unknown[];
        },
      },
    }) as WorkflowInstance;
  }

  /**
   * Reads the members still in the batch. Rejects like any Redis call (bounded by the commit
   * policy): the caller hands the batch back, as for a commit that could not reach Redis.
   */
  static async load(deps: BatchDeps, claim: Claim, definition: WorkflowDefinition): Promise<BatchAttempt> {
    const members = await batchMembers(deps.scripts, deps.keys, claim.id, commitPolicy(deps.options));
    return new BatchAttempt(deps, claim, members, definition);
  }

  /** The batch's members: whether any is left (a batch whose members were all cancelled runs no code). */
  get empty(): boolean {
    return this.members.ids.length === 0;
  }

  /**
   * Commits the results (the attempt's encoded array, one per member) with the batch: true once
   * committed, false if the lease was lost (nothing written).
   */
  async complete(result: string, journal: string): Promise<boolean> {
    const { maxPayloadBytes } = this.deps.options;
    const results = this.empty ? [] : decodePayload<unknown[]>(result);
    const members = this.members.ids.map(
      (id, i) => [id, encodePayload(results[i], `result of batch member "${id}"`, maxPayloadBytes)] as [string, string],
    );
    const outcome = await finishBatch(
      this.deps.scripts,
      this.deps.keys,
      { claim: this.claim, retentionMs: this.deps.options.defaults.resultTtlMs, journal, outcome: { kind: 'completed', members } },
      commitPolicy(this.deps.options),
    );
    return outcome === 'completed';
  }

  /** Records a failed attempt of the batch: a retry keeps its members waiting; for good, they fail with it. */
  async fail(request: Omit<FailRequest, 'claim' | 'retentionMs'>): Promise<FailOutcome> {
    const outcome = await finishBatch(
      this.deps.scripts,
      this.deps.keys,
      {
        claim: this.claim,
        retentionMs: this.deps.options.defaults.resultTtlMs,
        journal: request.journal,
        outcome: { kind: 'failed', error: request.error, retryable: request.retryable, delayMs: request.delayMs },
      },
      commitPolicy(this.deps.options),
    );
    return outcome === 'completed' ? 'lost' : outcome;
  }
}
