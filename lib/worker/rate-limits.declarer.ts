import type { LoggerService } from '@nestjs/common';
import type { WorkflowDefinition } from '../discovery/workflow.registry';
import { type DeclarationOutcome, EVERY_GROUP } from '../interfaces/limits';
import type { RateLimit } from '../interfaces/rate-limit';
import { writeRateLimit } from '../redis/commands/set-control.command';
import type { ScriptRunner } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';

const describe = (rate: RateLimit | null | undefined) => (rate ? `${rate.max} per ${rate.perMs} ms` : 'none');
const same = (a: RateLimit | null, b: RateLimit | undefined) => (a === null ? b === undefined : a.max === b?.max && a.perMs === b.perMs);

/**
 * At a worker's bootstrap, writes the rate limits its code declares (`@Workflow({ rateLimit,
 * groupRateLimit })`), like the caps: the latest bootstrap wins among declarations and logs what
 * it changed, and a limit dropped from the code is removed; a limit an operator set at runtime
 * stays until the code declares something else than what it overrode. Per-group overrides are
 * runtime settings, left alone. Two short calls per workflow, all sent at once.
 */
export async function declareRateLimits(
  scripts: ScriptRunner,
  keys: RedisKeys,
  workflows: WorkflowDefinition[],
  logger: LoggerService,
): Promise<void> {
  const declarations = workflows.flatMap((wf) =>
    (
      [
        [undefined, wf.rateLimit, 'rate limit'],
        [EVERY_GROUP, wf.groupRateLimit, 'group rate limit'],
      ] as const
    ).map(([group, rate, label]) => ({ wf, rate, label, write: writeRateLimit(scripts, keys, wf.name, group, rate ?? null, true) })),
  );
  // Written side by side (one round trip for all), logged in order.
  const written = await Promise.all(declarations.map(({ write }) => write));
  declarations.forEach(({ wf, rate, label }, i) => {
    const { previous, outcome } = written[i];
    if (outcome !== '' || !same(previous, rate)) {
      logDeclaration(
        logger,
        `${label} of ${wf.name}`,
        describe(previous),
        outcome === 'kept' ? describe(previous) : describe(rate),
        outcome,
        describe(rate),
      );
    }
  });
}

/**
 * The bootstrap's line about one fleet-wide value its code declares (`what`, e.g. `cap wf:x`):
 * changed, kept as an operator set it at runtime, or that runtime value replaced by a changed
 * declaration.
 */
export function logDeclaration(
  logger: LoggerService,
  what: string,
  previous: string,
  next: string,
  outcome: DeclarationOutcome,
  declared: string,
): void {
  if (outcome === 'kept') {
    logger.log(`Fleet-wide ${what} kept at ${previous}, set at runtime (the code declares ${declared}, as when it was set)`);
  } else if (outcome === 'dropped') {
    logger.log(`Fleet-wide ${what} changed from ${previous}, set at runtime, to ${next}: the code's declaration changed since`);
  } else {
    logger.log(`Fleet-wide ${what} changed from ${previous} to ${next}`);
  }
}
