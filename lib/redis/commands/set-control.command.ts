import type { DeclarationOutcome } from '../../interfaces/limits';
import { toRateLimit, type RateLimit } from '../../interfaces/rate-limit';
import type { ScriptRunner } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/**
 * Pauses or resumes a target checked by the caller (`checkPauseTarget`), in one call of
 * lua/set-control.lua.
 * @returns whether the call changed anything (`false`: it was paused already, or not paused to resume).
 */
export async function setPaused(
  scripts: ScriptRunner,
  keys: RedisKeys,
  target: { workflow: string; group?: string },
  paused: boolean,
): Promise<boolean> {
  const { workflow, group } = target;
  const [previous] = await scripts.run<[string, string]>(
    'set-control',
    [keys.limits, keys.seq],
    [keys.base, 'pause', workflow, group ?? '', paused ? '1' : '', ''],
    { idempotent: true },
  );
  return (previous === '1') !== paused;
}

/**
 * Sets or removes a rate limit (`group` '*' = every group's default) checked by the caller
 * (`checkRateLimit`): an operator's at runtime, or (`byCode`) a worker bootstrap's declaration,
 * which is written unless an operator's runtime value overrides this same declaration (`kept`:
 * nothing written, `previous` is the value in force; `dropped`: it replaced one that overrode
 * another). Resolves with the previous limit.
 */
export async function writeRateLimit(
  scripts: ScriptRunner,
  keys: RedisKeys,
  workflow: string,
  group: string | undefined,
  rateLimit: RateLimit | null,
  byCode: boolean,
): Promise<{ previous: RateLimit | null; outcome: DeclarationOutcome }> {
  const send = (kind: string, max: number | '', perMs: number | '') =>
    scripts.run<[string, string, number, string?]>(
      'set-control',
      [keys.limits, keys.seq],
      [keys.base, kind, workflow, group ?? '', max, perMs, byCode ? 'code' : ''],
      { idempotent: true },
    );
  const [max, perMs, left, outcome] = await send('rate', rateLimit ? rateLimit.max : '', rateLimit ? rateLimit.perMs : '');
  // The groups the old limit held are reviewed in batches of 500 (REVIEW_BATCH in
  // lua/set-control.lua, startRateReview in lua/includes/rate-reviews.lua): each is reviewed
  // once (one still without room is held again, out of the review), so the count only falls.
  // The workflow's reserves take batches too, and finish the review if this loop stops
  // part-way; setting the limit again goes on with it.
  for (let batches = Math.ceil(left / 500), remaining = left; remaining > 0 && batches > 0; batches--)
    [, , remaining] = await send('rate-review', '', '');
  return { previous: toRateLimit(max, perMs), outcome: (outcome ?? '') as DeclarationOutcome };
}
