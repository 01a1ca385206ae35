import { InvalidInputError, InvalidOptionError } from '../errors';
import { checkInteger } from '../util/duration';
import { checkName } from '../util/names';

/** `group` value that addresses the default cap of every group of a workflow. */
export const EVERY_GROUP = '*';

/**
 * Which fleet-wide cap `setLimits`/`getLimits` address:
 * - `{}`: the namespace cap (all runs of the namespace);
 * - `{ workflow }`: the workflow cap;
 * - `{ workflow, group: '*' }`: the default cap of each group of the workflow (`groupConcurrency`);
 * - `{ workflow, group }`: that group's override of the default.
 */
export interface LimitTarget {
  workflow?: string;
  group?: string;
}

/** The caps that apply to a target, as stored in Redis (`null` = no cap). */
export interface Limits {
  namespace: number | null;
  workflow?: number | null;
  /** Default cap of each group of the workflow. */
  groupDefault?: number | null;
  /** The group's own override, if any. */
  groupOverride?: number | null;
  /** The cap that holds for the group: its override, else the default. */
  group?: number | null;
}

/** Largest cap that can be stored. */
export const MAX_LIMIT = 1_000_000;

/** Field of the `limits` hash holding the cap a target addresses (see lua/includes/common.lua). */
export function limitField(target: LimitTarget): string {
  if (target === null || typeof target !== 'object') throw new InvalidInputError('target', 'must be an object: {}, { workflow } or { workflow, group }');
  if (target.workflow === undefined) {
    if (target.group !== undefined) throw new InvalidInputError('target.group', 'a group cap needs its workflow');
    return 'ns';
  }
  const workflow = checkName(target.workflow, 'target.workflow');
  if (target.group === undefined) return `wf:${workflow}`;
  if (target.group === EVERY_GROUP) return `wf:${workflow}:group`;
  return `wf:${workflow}:g:${checkName(target.group, 'target.group')}`;
}

/** A cap: a positive integer, or `null` to remove it. */
export function checkLimit(limit: unknown): number | null {
  if (limit === null) return null;
  if (limit === undefined) throw new InvalidOptionError('limit', 'is required (a positive integer, or null for no cap)');
  return checkInteger(limit, 'limit', 1, MAX_LIMIT);
}
