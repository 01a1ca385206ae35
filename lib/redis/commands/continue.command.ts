import type { LuaScripts } from '../lua.scripts';
import type { CallOptions } from '../redis.link';
import type { RedisKeys } from '../redis.keys';
import type { LeaseRef } from './save-steps.command';

/** One continue call (lua/continue.lua): `ctx.continueAsNew`, made only while `claim` still holds its lease. */
export interface ContinueRequest {
  claim: LeaseRef;
  /** The new incarnation's input, encoded. */
  input: string;
}

/**
 * Starts the run afresh under its id: true once continued (also when a retry finds its own
 * earlier landing), false if the lease was gone (nothing written). `policy`: the worker's commitPolicy.
 */
export async function continueAsNew(scripts: LuaScripts, keys: RedisKeys, request: ContinueRequest, policy: CallOptions): Promise<boolean> {
  const { claim } = request;
  const reply = await scripts.run<string>(
    'continue',
    [keys.run(claim.id), keys.leases, keys.limits, keys.seq],
    [keys.base, claim.id, claim.token, request.input],
    policy,
  );
  return reply === 'continued';
}
