import { refuseBatchTarget } from '../workflow/batch.options';
import type { AttemptJournal } from '../execution/attempt.journal';
import { buildEnqueueRequest } from '../workflow/enqueue.request';
import { checkInput } from '../workflow/schema.validate';
import { ChildRunConflictError, LeaseLostError, UnknownWorkflowError } from '../errors';
import type { WorkflowRegistry } from '../discovery/workflow.registry';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import type { InvokeOptions } from '../workflow/wait.types';
import type { Claim } from '../redis/commands/claim.reply';
import { commitPolicy } from '../redis/commands/commit.policy';
import { continueAsNew } from '../redis/commands/continue.command';
import { suspend } from '../redis/commands/suspend.command';
import type { ContinuePort } from '../execution/run.continuation';
import type { ChildRequest, SuspendReply, SuspendRequest, WaitPort } from '../execution/wait.port';
import type { Placed } from '../execution/step.recorder';
import type { OwnCommitFailures } from '../execution/commit.failures';

/**
 * A claimed run's waits against Redis: lua/suspend.lua (and lua/continue.lua), sent under the worker's commit policy
 * (a lost reply is sent again; the script recognises its own landing by the lease token), and
 * the checks a child's enqueue gets from `QueueClient.enqueue`.
 */
export class RedisWaitPort implements WaitPort, ContinuePort {
  constructor(
    private readonly scripts: LuaScripts,
    private readonly keys: RedisKeys,
    private readonly registry: WorkflowRegistry,
    private readonly options: ResolvedQueueOptions,
    private readonly claim: Claim,
    /** Where the attempt notes that this commit could not reach Redis (it then hands the run back). */
    private readonly commitFailures?: OwnCommitFailures,
  ) {}

  async suspend(request: SuspendRequest, room: number, positions: Placed[], journal: AttemptJournal): Promise<SuspendReply> {
    const { claim } = this;
    const entries = request.entries.map(({ placed, child }) => ({
      key: placed.key,
      child: child && { ...child, register: !this.registry.has(child.workflow) },
    }));
    const call = suspend(
      this.scripts,
      this.keys,
      {
        claim,
        kind: request.kind,
        afterMs: request.afterMs,
        atMs: request.atMs,
        target: request.target,
        room,
        journal: this.options.worker.timeline ? journal.encode(claim.attempt, 'suspended') : '',
        positions,
        entries,
      },
      commitPolicy(this.options),
    );
    const reply = await (this.commitFailures ? this.commitFailures.watch(call) : call);
    switch (reply.outcome) {
      case 'suspended':
        return 'suspended';
      case 'resumed':
        return { resumed: reply.resumed };
      case 'over':
        return { over: { key: reply.key, bytes: reply.bytes } };
      case 'conflict':
        throw new ChildRunConflictError(reply.childId);
      case 'unknown':
        // Retried like any run of an unknown workflow: its worker may not have booted yet.
        throw new UnknownWorkflowError(reply.workflow);
      case 'lost':
        throw new LeaseLostError(claim.id);
    }
  }

  async continueAsNew(input: string): Promise<void> {
    const { claim } = this;
    const call = continueAsNew(this.scripts, this.keys, { claim, input }, commitPolicy(this.options));
    if (!(await (this.commitFailures ? this.commitFailures.watch(call) : call))) throw new LeaseLostError(claim.id);
  }

  childRequest(workflow: unknown, input: unknown, opts: InvokeOptions | undefined): ChildRequest {
    const target = this.registry.resolve(workflow as Parameters<WorkflowRegistry['resolve']>[0]);
    refuseBatchTarget(target, 'ctx.invoke workflow');
    const request: ChildRequest = buildEnqueueRequest(target, input, opts, this.options.maxPayloadBytes);
    const checking = checkInput(target, input, 'ctx.invoke input');
    if (checking) {
      checking.catch(() => undefined); // awaited by the wait; handled here in case an earlier call throws first
      request.checking = checking;
    }
    return request;
  }
}
