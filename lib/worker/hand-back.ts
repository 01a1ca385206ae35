import { release } from '../redis/commands/release.command';
import type { LeaseRef } from '../redis/commands/save-steps.command';
import type { LuaScripts } from '../redis/lua.scripts';
import type { CallOptions } from '../redis/redis.link';
import type { RedisKeys } from '../redis/redis.keys';

/**
 * First delay of a run handed back because its own commits could not reach Redis; it doubles with
 * each such hand-back of the run (counted in its record, `handbacks`) up to {@link MAX_HAND_BACK_DELAY_MS}.
 * A run whose commits keep failing while Redis still takes the hand-back (a flaky path, a reply
 * that never fits the bound) would otherwise be claimed again at once, and spin.
 */
export const HAND_BACK_DELAY_MS = 1_000;
export const MAX_HAND_BACK_DELAY_MS = 30_000;

/**
 * Returns a claimed run (its id and the lease token of the attempt handing it back) to the queue
 * without counting a failure (lua/release.lua). `backoff`: the run is delayed
 * ({@link HAND_BACK_DELAY_MS}, doubling per hand-back of its own, jittered ±20 % so runs handed
 * back together do not return in lockstep); without it (a shutdown) the run is due again at once,
 * at the front of its priority. Resolves true if released, false if the lease was already gone.
 */
export function handBackRun(
  scripts: LuaScripts,
  keys: RedisKeys,
  run: LeaseRef,
  options: CallOptions,
  backoff = false,
  random = Math.random,
): Promise<boolean> {
  const delays = backoff
    ? { firstDelayMs: Math.round(HAND_BACK_DELAY_MS * (0.8 + 0.4 * random())), maxDelayMs: MAX_HAND_BACK_DELAY_MS }
    : undefined;
  return release(scripts, keys, { claim: run, backoff: delays }, options);
}
