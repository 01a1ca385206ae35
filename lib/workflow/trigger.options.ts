import { InvalidNameError, InvalidOptionError } from '../errors';
import { checkId, MAX_ID_LENGTH, MAX_NAME_LENGTH } from '../util/names';
import type { WorkflowOptions } from './workflow.types';

/**
 * What starts a run id that an event started: `evt:<event id>:<workflow>`. Derived, so that a
 * publish repeated (a retry, another producer) finds the runs the first one made; the workflow
 * name holds no `:`, so the last one splits the two. The worker applies a workflow's `filter`
 * only to runs with such an id.
 */
export const TRIGGER_RUN_PREFIX = 'evt:';

/** Longest event id: its runs' ids (prefix, id, `:`, workflow name) must stay run ids. */
export const MAX_EVENT_ID_LENGTH = MAX_ID_LENGTH - TRIGGER_RUN_PREFIX.length - 1 - MAX_NAME_LENGTH;

/** Most workflows one event name may start, and most event names one workflow may list. */
export const MAX_SUBSCRIPTIONS = 100;

/** The id of the run that event `eventId` starts of `workflow`. */
export function triggerRunId(eventId: string, workflow: string): string {
  return `${TRIGGER_RUN_PREFIX}${eventId}:${workflow}`;
}

/** Whether an event started the run with this id (see {@link TRIGGER_RUN_PREFIX}). */
export function isTriggerRun(runId: string): boolean {
  return runId.startsWith(TRIGGER_RUN_PREFIX);
}

/** Checks an event name (as `ctx.waitForEvent` names take it: a wait of that name is resumed too). */
export function checkEventName(value: unknown, field: string): string {
  return checkId(value, field);
}

/** Checks an event id: a run id's characters, at most {@link MAX_EVENT_ID_LENGTH} of them. */
export function checkEventId(value: unknown, field: string): string {
  const id = checkId(value, field);
  if (id.length > MAX_EVENT_ID_LENGTH)
    throw new InvalidNameError(field, `must be at most ${MAX_EVENT_ID_LENGTH} characters (it is part of its runs' ids), got ${id.length}`);
  return id;
}

/**
 * Checks `@Workflow({ on, filter })`; returns the event names, sorted and without repeats (what
 * the bootstrap declares), or undefined without `on`.
 */
export function checkTriggerOptions(name: string, options: WorkflowOptions): string[] | undefined {
  const field = `@Workflow('${name}')`;
  if (options.filter !== undefined && typeof options.filter !== 'function')
    throw new InvalidOptionError(`${field} filter`, `must be a function (payload) => boolean, got ${typeof options.filter}`);
  if (options.on === undefined) {
    if (options.filter !== undefined) throw new InvalidOptionError(`${field} filter`, 'needs `on`: it decides which events start a run');
    return undefined;
  }
  if (typeof options.on !== 'string' && !Array.isArray(options.on))
    throw new InvalidOptionError(`${field} on`, `must be an event name or an array of them, got ${typeof options.on}`);
  const list: readonly unknown[] = typeof options.on === 'string' ? [options.on] : options.on;
  if (list.length === 0) throw new InvalidOptionError(`${field} on`, 'must name at least one event (leave `on` out for none)');
  if (list.length > MAX_SUBSCRIPTIONS) throw new InvalidOptionError(`${field} on`, `must name at most ${MAX_SUBSCRIPTIONS} events`);
  const names = list.map((event, i) => checkEventName(event, typeof options.on === 'string' ? `${field} on` : `${field} on[${i}]`));
  return [...new Set(names)].sort();
}
