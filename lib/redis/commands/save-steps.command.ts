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

/** The ARGV of a batch of step writes, four values each (as save-steps and complete take them). */
export function stepArgs(steps: StepWrite[]): string[] {
  return steps.flatMap(({ claim, key, encoded }) => [claim.id, claim.token, key, encoded]);
}

/**
 * Saves a batch of step results (lua/save-steps.lua): per step, true once saved, false if its
 * lease was lost (nothing written). `policy`: the worker's commitPolicy.
 */
export async function saveSteps(scripts: LuaScripts, keys: RedisKeys, steps: StepWrite[], policy: CallOptions): Promise<boolean[]> {
  const saved = await scripts.run<number[]>('save-steps', [keys.leases], [keys.base, ...stepArgs(steps)], policy);
  return saved.map((status) => status === 1);
}
