import type { ScriptRunner } from '../lua.scripts';
import type { CallOptions } from '../redis.link';
import type { RedisKeys } from '../redis.keys';

/** One workflow's subscriptions as its code declares them (`@Workflow({ on })`). */
export interface TriggerDeclaration {
  workflow: string;
  /** Max attempts of the runs its events start. */
  attempts: number;
  /** Event names, sorted; empty: subscribed to none (its earlier subscriptions are dropped). */
  events: readonly string[];
}

/** A workflow whose subscriptions the declaration changed. */
export interface TriggerChange {
  workflow: string;
  added: string[];
  removed: string[];
}

/**
 * Subscribes each workflow to its events and unsubscribes it from the others
 * (lua/declare-triggers.lua). Repeating it is harmless; `failFast` at bootstrap.
 */
export async function declareTriggers(
  scripts: ScriptRunner,
  keys: RedisKeys,
  declarations: TriggerDeclaration[],
  options: Pick<CallOptions, 'failFast'> = {},
): Promise<TriggerChange[]> {
  const args: (string | number)[] = [keys.base];
  for (const { workflow, attempts, events } of declarations) args.push(workflow, attempts, events.length, ...events);
  const flat = await scripts.run<string[]>('declare-triggers', [keys.workflows], args, { idempotent: true, failFast: options.failFast });
  const changes: TriggerChange[] = [];
  const list = (text: string) => (text === '' ? [] : text.split(' '));
  for (let i = 0; i < flat.length; i += 3) changes.push({ workflow: flat[i], added: list(flat[i + 1]), removed: list(flat[i + 2]) });
  return changes;
}
