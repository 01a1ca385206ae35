import { InvalidInputError, InvalidOptionError } from '../errors';
import { checkInteger } from '../util/duration';
import { checkName } from '../util/names';
import { MAX_LIMIT, type RateLimit } from './rate-limit';

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
  /** The workflow's name; omit for the namespace cap. */
  workflow?: string;
  /** With `workflow`: a group's name, or {@link EVERY_GROUP} (`'*'`) for every group's default. */
  group?: string;
}

/**
 * What a worker bootstrap did with a value its code declares: `''` wrote (or kept) the code's
 * value; `'kept'` left a value an operator set at runtime, as the code still declares what that
 * value overrode; `'dropped'` replaced such a value, as the code now declares something else.
 */
export type DeclarationOutcome = '' | 'kept' | 'dropped';

/**
 * A value set at runtime (`QueueClient.setLimits`) over one that code declares, and the value the
 * code declared when it was set (`null` = none). Worker bootstraps keep it while their code still
 * declares that; a bootstrap whose code declares something else replaces it.
 */
export interface RuntimeOverride<T> {
  /** What the code declared when the value was set at runtime; `null` if it declared nothing. */
  declared: T | null;
}

/** The values of {@link Limits} that were set at runtime over a declaration of code. */
export interface RuntimeOverrides {
  /** `Limits.namespace` was set at runtime. */
  namespace?: RuntimeOverride<number>;
  /** `Limits.workflow` was set at runtime. */
  workflow?: RuntimeOverride<number>;
  /** `Limits.groupDefault` was set at runtime. */
  groupDefault?: RuntimeOverride<number>;
  /** `Limits.rateLimit` was set at runtime. */
  rateLimit?: RuntimeOverride<RateLimit>;
  /** `Limits.groupRateLimit` was set at runtime. */
  groupRateLimit?: RuntimeOverride<RateLimit>;
}

/** The caps that apply to a target, as stored in Redis (`null` = no cap). */
export interface Limits {
  /** The namespace cap: runs of all its workflows active at once. Always present. */
  namespace: number | null;
  /** The workflow cap; present when the target names a workflow. */
  workflow?: number | null;
  /** Default cap of each group of the workflow. */
  groupDefault?: number | null;
  /** The group's own override, if any. */
  groupOverride?: number | null;
  /** The cap that holds for the group: its override, else the default. */
  group?: number | null;
  /** The workflow's rate limit. */
  rateLimit?: RateLimit | null;
  /** Default rate limit of each group of the workflow. */
  groupRateLimit?: RateLimit | null;
  /** The group's own rate limit override, if any. */
  groupRateOverride?: RateLimit | null;
  /** The rate limit that holds for the group: its override, else the default. */
  groupRate?: RateLimit | null;
  /**
   * Who set what: the values above that an operator set at runtime over what code declares, each
   * with that declaration. Absent when every one is the code's (a group's own override is always
   * a runtime setting and is not listed).
   */
  setAtRuntime?: RuntimeOverrides;
}

/** Field of the `limits` hash holding the cap a target addresses (see lua/includes/limits.lua and caps.lua). */
export function limitField(target: LimitTarget): string {
  if (target === null || typeof target !== 'object')
    throw new InvalidInputError('target', 'must be an object: {}, { workflow } or { workflow, group }');
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

/** The fields of `runtime-limits` (lib/redis/redis.keys.ts) that tell who set a target's values, each with the {@link Limits} key it concerns. */
export function runtimeFields(workflow?: string): Array<[keyof RuntimeOverrides, string]> {
  if (workflow === undefined) return [['namespace', 'ns']];
  const wf = `wf:${workflow}`;
  return [
    ['namespace', 'ns'],
    ['workflow', wf],
    ['groupDefault', `${wf}:group`],
    ['rateLimit', `${wf}:rate`],
    ['groupRateLimit', `${wf}:group-rate`],
  ];
}

/** `runtime-limits` values read for {@link runtimeFields} → `Limits.setAtRuntime` (undefined when none was set at runtime). */
export function toRuntimeOverrides(
  fields: Array<[keyof RuntimeOverrides, string]>,
  values: Array<string | null>,
): RuntimeOverrides | undefined {
  const overrides: Record<string, RuntimeOverride<number | RateLimit>> = {};
  fields.forEach(([key], i) => {
    const declared = values[i];
    if (declared === null) return;
    if (declared === '') overrides[key] = { declared: null };
    else if (key === 'rateLimit' || key === 'groupRateLimit') {
      const [max, perMs] = declared.split('/');
      overrides[key] = { declared: { max: Number(max), perMs: Number(perMs) } };
    } else overrides[key] = { declared: Number(declared) };
  });
  return Object.keys(overrides).length > 0 ? overrides : undefined;
}

/** Limits-hash fields of the rate limits that apply to a target, in the order `QueueAdmin.getLimits` reads them. */
export function rateFields(workflow: string, group?: string): string[] {
  const wf = `wf:${workflow}`;
  const fields = [`${wf}:rate`, `${wf}:rate-ms`, `${wf}:group-rate`, `${wf}:group-rate-ms`];
  if (group && group !== EVERY_GROUP) fields.push(`${wf}:g:${group}:rate`, `${wf}:g:${group}:rate-ms`);
  return fields;
}
