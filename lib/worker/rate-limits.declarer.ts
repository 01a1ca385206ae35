import type { LoggerService } from '@nestjs/common';
import { EVERY_GROUP } from '../client/limits';
import type { RateLimit } from '../client/rate-limit';
import type { RunControl } from '../client/run.control';
import type { WorkflowDefinition } from '../discovery/workflow.registry';

const describe = (rate: RateLimit | null | undefined) => (rate ? `${rate.max} per ${rate.perMs} ms` : 'none');
const same = (a: RateLimit | null, b: RateLimit | undefined) => (a === null ? b === undefined : a.max === b?.max && a.perMs === b.perMs);

/**
 * At a worker's bootstrap, writes the rate limits its code declares (`@Workflow({ rateLimit,
 * groupRateLimit })`), like the caps: the latest bootstrap wins and logs what it changed, and a
 * limit dropped from the code is removed. Per-group overrides are runtime settings, left alone.
 * Two short calls per workflow.
 */
export async function declareRateLimits(control: RunControl, workflows: WorkflowDefinition[], logger: LoggerService): Promise<void> {
  for (const wf of workflows) {
    for (const [group, rate, label] of [[undefined, wf.rateLimit, 'rate limit'], [EVERY_GROUP, wf.groupRateLimit, 'group rate limit']] as const) {
      const previous = await control.setRateLimit(wf.name, group, rate ?? null);
      if (!same(previous, rate)) logger.log(`Fleet-wide ${label} of ${wf.name} changed from ${describe(previous)} to ${describe(rate)}`);
    }
  }
}
