import type { LuaScripts } from '../lua.scripts';
import type { CallOptions } from '../redis.link';
import type { RedisKeys } from '../redis.keys';
import type { LeaseRef } from './save-steps.command';

/** One release call (lua/release.lua): a claimed run handed back without counting a failure. */
export interface ReleaseRequest {
  /** The run, and the lease token of the attempt handing it back. */
  claim: LeaseRef;
  /**
   * The hand-back of an attempt whose own commits could not reach Redis: the run is delayed by
   * `firstDelayMs` doubled per such hand-back of its own, at most `maxDelayMs`, and its count
   * 'handbacks' goes up. Absent (a shutdown): the run is due again at once, the count untouched.
   */
  backoff?: { firstDelayMs: number; maxDelayMs: number };
}

/**
 * Hands a claimed run back: true once released (also when a retry finds its own earlier
 * landing), false if the lease was already gone (nothing written). Repeating it is harmless.
 */
export async function release(scripts: LuaScripts, keys: RedisKeys, request: ReleaseRequest, options: CallOptions): Promise<boolean> {
  const { claim, backoff } = request;
  const args: (string | number)[] = [keys.base, claim.id, claim.token];
  if (backoff) args.push(backoff.firstDelayMs, backoff.maxDelayMs);
  return (await scripts.run<number>('release', [keys.run(claim.id), keys.leases, keys.limits, keys.seq], args, options)) === 1;
}
