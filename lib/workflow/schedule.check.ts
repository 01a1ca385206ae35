import { InvalidOptionError } from '../errors';
import { MAX_PRIORITY } from '../interfaces/enqueue.options';
import type { DeclaredSchedule, ScheduleDefinition } from '../interfaces/schedule.options';
import { encodePayload } from '../redis/payload.codec';
import { checkInteger } from '../util/duration';
import { checkName } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';
import type { CronPattern } from './cron.plan';
import { checkScheduleTiming } from './schedule.timing';

/** The keys of a {@link ScheduleDefinition} (`ScheduleOptions`). */
export const SCHEDULE_OPTIONS: readonly string[] = [
  'cron',
  'tz',
  'every',
  'offsetMs',
  'input',
  'group',
  'priority',
  'overlap',
  'catchUp',
  'catchUpLimit',
];
/** The keys of a {@link DeclaredSchedule}: a definition and its id. */
export const DECLARED_SCHEDULE_OPTIONS: readonly string[] = ['id', ...SCHEDULE_OPTIONS];

export const DEFAULT_CATCH_UP_LIMIT = 100;
export const MAX_CATCH_UP_LIMIT = 1_000;

/** A validated schedule, ready to be written. */
export interface ScheduleSpec {
  id: string;
  workflow: string;
  pattern: CronPattern;
  /** Encoded input. */
  input: string;
  group: string;
  priority: number;
  attempts: number;
  overlap: boolean;
  catchUp: 'latest' | 'all';
  catchUpLimit: number;
  /** Everything that defines it, as one string: an upsert with an equal fingerprint changes nothing. */
  fingerprint: string;
}

/**
 * Checks a schedule before anything is written; `field` prefixes error names (`opts`, or
 * `@Workflow('report') schedules[1]`).
 * @throws InvalidScheduleError, InvalidNameError, InvalidOptionError, PayloadNotSerializableError, PayloadTooLargeError
 */
export function buildScheduleSpec(
  id: string,
  workflow: { name: string; attempts: number },
  definition: ScheduleDefinition,
  field: string,
  maxPayloadBytes: number,
  allowed = SCHEDULE_OPTIONS,
): ScheduleSpec {
  if (definition === null || typeof definition !== 'object')
    throw new InvalidOptionError(field, 'must be an object { cron, tz?, input?, … } or { every, offsetMs?, input?, … }');
  checkOptionKeys(definition, allowed, field);
  checkName(id, field === 'opts' ? 'id' : `${field}.id`);
  const pattern = checkScheduleTiming(definition, field, id);
  if (definition.overlap !== undefined && typeof definition.overlap !== 'boolean')
    throw new InvalidOptionError(`${field}.overlap`, `must be a boolean, got ${String(definition.overlap)}`);
  if (definition.catchUp !== undefined && definition.catchUp !== 'latest' && definition.catchUp !== 'all') {
    throw new InvalidOptionError(`${field}.catchUp`, `must be 'latest' or 'all', got ${JSON.stringify(definition.catchUp)}`);
  }
  const spec: Omit<ScheduleSpec, 'fingerprint'> = {
    id,
    workflow: workflow.name,
    pattern,
    input: encodePayload(definition.input === undefined ? null : definition.input, `${field}.input`, maxPayloadBytes),
    group: definition.group === undefined ? '' : checkName(definition.group, `${field}.group`),
    priority: definition.priority === undefined ? 0 : checkInteger(definition.priority, `${field}.priority`, 0, MAX_PRIORITY),
    attempts: workflow.attempts,
    overlap: definition.overlap ?? true,
    catchUp: definition.catchUp ?? 'latest',
    catchUpLimit:
      definition.catchUpLimit === undefined
        ? DEFAULT_CATCH_UP_LIMIT
        : checkInteger(definition.catchUpLimit, `${field}.catchUpLimit`, 1, MAX_CATCH_UP_LIMIT),
  };
  const { pattern: p, input, group, priority, attempts, overlap, catchUp, catchUpLimit } = spec;
  return { ...spec, fingerprint: JSON.stringify([p.cron, p.tz ?? '', input, group, priority, attempts, overlap, catchUp, catchUpLimit]) };
}

/**
 * Checks a workflow's declared schedules at the decorator: each valid, ids unique within the
 * workflow, an id required when there are several. Returns them with their ids filled in.
 */
export function checkDeclaredSchedules(workflow: string, schedules: unknown): Array<DeclaredSchedule & { id: string }> {
  const field = `@Workflow('${workflow}') schedules`;
  if (!Array.isArray(schedules)) throw new InvalidOptionError(field, 'must be an array of { cron | every, id?, input?, … }');
  const ids = new Set<string>();
  return schedules.map((schedule: DeclaredSchedule, index) => {
    const at = `${field}[${index}]`;
    if (schedule === null || typeof schedule !== 'object')
      throw new InvalidOptionError(at, 'must be an object { cron | every, id?, input?, … }');
    checkOptionKeys(schedule, DECLARED_SCHEDULE_OPTIONS, at);
    if (schedule.id === undefined && schedules.length > 1)
      throw new InvalidOptionError(`${at}.id`, 'is required when a workflow declares several schedules');
    const id = schedule.id === undefined ? workflow : schedule.id;
    if (ids.has(id)) throw new InvalidOptionError(`${at}.id`, `"${id}" is declared twice`);
    ids.add(id);
    // Validates everything but the workflow-dependent attempts, which bootstrap resolves.
    buildScheduleSpec(id, { name: workflow, attempts: 1 }, schedule, at, Number.MAX_SAFE_INTEGER, DECLARED_SCHEDULE_OPTIONS);
    return { ...schedule, id };
  });
}
