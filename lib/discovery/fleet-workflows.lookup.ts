import { OutcomeUnknownError, RedisUnavailableError, UnknownWorkflowError } from '../errors';
import type { RedisKeys } from '../redis/redis.keys';
import type { RedisLink } from '../redis/redis.link';

/**
 * Names remembered as registered. A producer enqueues a handful of workflows; the bound only
 * keeps a caller that passes arbitrary user-given names from growing the cache without limit.
 */
const MAX_CACHED_NAMES = 10_000;

/**
 * Answers whether a workflow this process does not declare is run by some worker of the fleet:
 * whether a worker bootstrap ever added it to the namespace's `workflows` set (lua/declare-limits.lua).
 * It lets a producer-only process enqueue by name or contract without the workflow's class, while
 * a typo still fails before anything is written.
 *
 * A name found is cached for the life of the process (workers never remove theirs), so it costs
 * one SISMEMBER the first time only; a name not found is asked again next time, since a worker
 * that registers it may start later. Concurrent first calls for one name share one read.
 */
export class FleetWorkflowLookup {
  private readonly registered = new Set<string>();
  private readonly pending = new Map<string, Promise<boolean>>();

  constructor(
    private readonly link: RedisLink,
    private readonly keys: RedisKeys,
  ) {}

  /**
   * Resolves once `name` is known to be registered in Redis.
   * @param operation the client call this check belongs to, named in errors (`enqueue`, `schedule`…)
   * @throws UnknownWorkflowError if no worker ever registered it (nothing was written)
   * @throws RedisUnavailableError if Redis did not answer within `redisTimeoutMs`: the caller's
   *   own write was never sent, so it can be repeated as it is
   */
  async confirm(name: string, operation: string): Promise<void> {
    if (this.registered.has(name)) return;
    let lookup = this.pending.get(name);
    if (!lookup) {
      lookup = this.read(name, operation).finally(() => this.pending.delete(name));
      this.pending.set(name, lookup);
    }
    if (!(await lookup)) {
      throw new UnknownWorkflowError(
        name,
        `no @Workflow in this application declares it, and no worker has registered it on ${this.keys.base.slice(0, -1)}`,
      );
    }
  }

  private async read(name: string, operation: string): Promise<boolean> {
    let found: number;
    try {
      found = await this.link.call(operation, (redis) => redis.sismember(this.keys.workflows, name), { idempotent: true });
    } catch (error) {
      // A lost reply to a read changed nothing, and the write it guards was never sent: say so,
      // rather than the "may have taken effect" of OutcomeUnknownError.
      if (error instanceof OutcomeUnknownError) {
        throw new RedisUnavailableError(
          operation,
          `checking that workflow "${name}" is registered got no reply (${error.message}); nothing was written`,
          { cause: error },
        );
      }
      throw error;
    }
    if (found !== 1) return false;
    if (this.registered.size >= MAX_CACHED_NAMES) this.registered.clear();
    this.registered.add(name);
    return true;
  }
}
