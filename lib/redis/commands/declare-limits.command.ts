import type { ScriptRunner } from '../lua.scripts';
import type { CallOptions } from '../redis.link';
import type { RedisKeys } from '../redis.keys';

/** One cap a worker's code declares. */
export interface CapDeclaration {
  /** Its field in the limits hash (e.g. 'ns', limitField(…)). */
  field: string;
  /** '' = no cap: the field is removed. */
  limit: string;
  /** The workflow it concerns ('' = namespace). */
  workflow: string;
  /** The group it concerns ('*' = every group, or ''). */
  group: string;
}

/** A field the declaration changed, or that holds a runtime value (see lua/declare-limits.lua). */
export interface CapChange {
  field: string;
  /** '' if none. */
  previous: string;
  /** '' if none. */
  next: string;
  /** '' the code's value written; 'dropped' a runtime value replaced; 'kept' a runtime value left as it is. */
  outcome: '' | 'kept' | 'dropped';
  /** The limit the code declares. */
  declared: string;
}

/**
 * Registers `workflows` and writes the caps their code declares (lua/declare-limits.lua).
 * Repeating it is harmless; `failFast` at bootstrap.
 */
export async function declareLimits(
  scripts: ScriptRunner,
  keys: RedisKeys,
  workflows: string[],
  caps: CapDeclaration[],
  options: Pick<CallOptions, 'failFast'> = {},
): Promise<CapChange[]> {
  const capArgs = caps.flatMap(({ field, limit, workflow, group }) => [field, limit, workflow, group]);
  const args = [keys.base, workflows.length, ...workflows, ...capArgs];
  const flat = await scripts.run<string[]>('declare-limits', [keys.limits, keys.workflows, keys.seq], args, {
    idempotent: true,
    failFast: options.failFast,
  });
  const changes: CapChange[] = [];
  for (let i = 0; i < flat.length; i += 5) {
    const [field, previous, next, outcome, declared] = flat.slice(i, i + 5);
    changes.push({ field, previous, next, outcome: outcome as CapChange['outcome'], declared });
  }
  return changes;
}
