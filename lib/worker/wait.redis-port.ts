import type { AttemptJournal } from '../execution/attempt.journal';
import type { EnqueueRequest } from '../interfaces/enqueue.options';
import { buildEnqueueRequest } from '../workflow/enqueue.request';
import { checkOptionKeys } from '../util/option-keys';
import { ChildRunConflictError, LeaseLostError, UnknownWorkflowError } from '../errors';
import type { WorkflowRegistry } from '../discovery/workflow.registry';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import type { InvokeOptions } from '../workflow/wait.types';
import type { Claim } from '../redis/commands/claim.reply';
import { commitPolicy } from '../redis/commands/commit.policy';
import type { ContinuePort } from '../execution/run.continuation';
import type { SuspendReply, SuspendRequest, WaitPort } from '../execution/wait.port';
import type { Placed } from '../execution/step.recorder';
import type { OwnCommitFailures } from '../execution/commit.failures';

const INVOKE_OPTIONS: readonly string[] = ['id', 'priority', 'group', 'attempts'];

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
    const { claim, keys } = this;
    const entries = request.entries.flatMap(({ placed, child }) => {
      const entry: (string | number)[] = [placed.key];
      if (child) entry.push(child.id, child.workflow, child.input, child.attempts, child.group ?? '', child.priority, this.registry.has(child.workflow) ? 0 : 1);
      return entry;
    });
    const args = [
      keys.base, claim.id, claim.token, request.kind, request.afterMs ?? '', request.atMs ?? '', request.target, room,
      this.options.worker.timeline ? journal.encode(claim.attempt, 'suspended') : '', positions.length, ...positions.flatMap(({ field, value }) => [field, value]), request.entries.length, ...entries,
    ];
    const call = this.scripts.run<[string, unknown, unknown?]>('suspend', [keys.run(claim.id), keys.leases, keys.limits, keys.seq], args, commitPolicy(this.options));
    const reply = await (this.commitFailures ? this.commitFailures.watch(call) : call);
    switch (reply[0]) {
      case 'suspended':
        return 'suspended';
      case 'resumed': {
        const flat = reply[1] as string[];
        const resumed = new Map<string, string>();
        for (let i = 0; i < flat.length; i += 2) resumed.set(flat[i], flat[i + 1]);
        return { resumed };
      }
      case 'over':
        return { over: { key: String(reply[1]), bytes: Number(reply[2]) } };
      case 'conflict':
        throw new ChildRunConflictError(String(reply[1]));
      case 'unknown':
        // Retried like any run of an unknown workflow: its worker may not have booted yet.
        throw new UnknownWorkflowError(String(reply[1]));
      default:
        throw new LeaseLostError(claim.id);
    }
  }

  async continueAsNew(input: string): Promise<void> {
    const { claim, keys } = this;
    const call = this.scripts.run<string>('continue', [keys.run(claim.id), keys.leases, keys.limits, keys.seq], [keys.base, claim.id, claim.token, input], commitPolicy(this.options));
    const reply = await (this.commitFailures ? this.commitFailures.watch(call) : call);
    if (reply !== 'continued') throw new LeaseLostError(claim.id);
  }

  childRequest(workflow: unknown, input: unknown, opts: InvokeOptions | undefined): EnqueueRequest {
    checkOptionKeys(opts, INVOKE_OPTIONS, 'ctx.invoke opts');
    const target = this.registry.resolve(workflow as Parameters<WorkflowRegistry['resolve']>[0]);
    return buildEnqueueRequest(target, input, opts, this.options.maxPayloadBytes);
  }
}
