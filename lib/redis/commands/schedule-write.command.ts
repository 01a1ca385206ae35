import type { ScriptRunner } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/**
 * What `schedule-write` did to one schedule; at a bootstrap only, `'newer'`: not declared by this
 * code, left alone because a newer declaration of its workflow declares it; `'kept'`: changed at
 * runtime over the definition this code declares, left as the operator set it.
 */
export type ScheduleChange = 'added' | 'changed' | 'unchanged' | 'removed' | 'newer' | 'kept';

/** One workflow's declared schedules as a whole, at a bootstrap: see `declarationFingerprint`. */
export interface WorkflowDeclaration {
  workflow: string;
  fingerprint: string;
}

/** One schedule as lua/schedule-write.lua stores it. */
export interface ScheduleRecord {
  id: string;
  workflow: string;
  fingerprint: string;
  cron: string;
  /** '' for the server's zone. */
  tz: string;
  /** Encoded input. */
  input: string;
  /** '' for none. */
  group: string;
  priority: number;
  attempts: number;
  overlap: boolean;
  catchUp: string;
  catchUpLimit: number;
  /** Occurrences (ascending ms), computed from Redis time. */
  plan: number[];
}

/** Its id already belongs to another workflow: nothing was written. */
export interface ScheduleConflict {
  conflict: { id: string; owner: string };
}

/** What each schedule written or removed went through. */
export interface ScheduleWritten {
  changes: Array<{ id: string; change: ScheduleChange }>;
}

/**
 * Writes schedules (lua/schedule-write.lua): one from the API ('api'), or those a worker's code
 * declares ('code', which also removes the ones `declarations` no longer declare). Every
 * conflict is checked before the first write. Repeating it is harmless.
 */
export async function writeSchedules(
  scripts: ScriptRunner,
  keys: RedisKeys,
  mode: 'api' | 'code',
  schedules: ScheduleRecord[],
  declarations: WorkflowDeclaration[],
): Promise<ScheduleConflict | ScheduleWritten> {
  const items = schedules.flatMap((s) => [
    s.id,
    s.workflow,
    s.fingerprint,
    s.cron,
    s.tz,
    s.input,
    s.group,
    s.priority,
    s.attempts,
    s.overlap ? 1 : 0,
    s.catchUp,
    s.catchUpLimit,
    s.plan.join(','),
  ]);
  const reply = await scripts.run<string[]>(
    'schedule-write',
    [keys.schedules],
    [keys.base, mode, schedules.length, declarations.length, ...declarations.flatMap((d) => [d.workflow, d.fingerprint]), ...items],
    { idempotent: true },
  );
  if (reply[0] === 'conflict') return { conflict: { id: reply[1], owner: reply[2] } };
  const changes: ScheduleWritten['changes'] = [];
  for (let i = 0; i < reply.length; i += 2) changes.push({ id: reply[i], change: reply[i + 1] as ScheduleChange });
  return { changes };
}
