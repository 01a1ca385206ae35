import type { LuaScripts } from '../lua.scripts';
import type { CallOptions } from '../redis.link';
import type { RedisKeys } from '../redis.keys';

/** The lease a token-checked write is made under: a run's id and its attempt's token. */
export interface LeaseRef {
  id: string;
  token: string;
}

/** A finished step's result, written only while `claim` still holds its run's lease. */
export interface StepWrite {
  claim: LeaseRef;
  /** '<name>#<occurrence>'. */
  key: string;
  /** The encoded result ('' = undefined). */
  encoded: string;
}

/**
 * Saves a batch of step results (lua/save-steps.lua): per step, true once saved, false if its
 * lease was lost (nothing written). `policy`: the worker's commitPolicy.
 */
export async function saveSteps(scripts: LuaScripts, keys: RedisKeys, steps: StepWrite[], policy: CallOptions): Promise<boolean[]> {
  // Four values per step (as complete takes them too), pushed into one array.
  const args: string[] = [keys.base];
  for (const { claim, key, encoded } of steps) args.push(claim.id, claim.token, key, encoded);
  const saved = await scripts.run<number[]>('save-steps', [keys.leases], args, policy);
  return saved.map((status) => status === 1);
}
