import { Injectable } from '@nestjs/common';
import {
  checkLimit,
  EVERY_GROUP,
  limitField,
  rateFields,
  runtimeFields,
  toRuntimeOverrides,
  type LimitTarget,
  type Limits,
} from '../interfaces/limits';
import { toRateLimit } from '../interfaces/rate-limit';
import { activateGroups } from '../redis/commands/activate-groups.command';
import { writeCap } from '../redis/commands/set-limits.command';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import { checkOptionKeys } from '../util/option-keys';

/**
 * Fleet-wide caps for `QueueAdmin`: setting one (lua/set-limits.lua, then lua/activate-groups.lua
 * for every group's default) and reading what applies to a target (two reads).
 */
@Injectable()
export class RunLimits {
  constructor(
    private readonly scripts: LuaScriptsProvider,
    private readonly connections: RedisConnections,
    private readonly keys: RedisKeys,
  ) {}

  /** Sets or removes the cap a target addresses; resolves with the previous one. */
  async setCap(target: LimitTarget & { limit?: number | null }): Promise<number | null> {
    const field = limitField(target);
    const limit = checkLimit(target.limit);
    const scripts = this.scripts.get();
    const { previous, groupsCursor } = await writeCap(scripts, this.keys, { field, limit, workflow: target.workflow, group: target.group });
    // Only for every group's default: set-limits visited the first batch of groups, the rest follow.
    if (groupsCursor !== null) await activateGroups(scripts, this.keys, target.workflow ?? '', groupsCursor);
    return previous;
  }

  /** The caps and rate limits stored for a target (see `QueueAdmin.getLimits`). */
  async get(target: LimitTarget): Promise<Limits> {
    limitField(target); // validates
    checkOptionKeys(target, ['workflow', 'group'], 'getLimits target');
    const { workflow, group } = target;
    const fields = ['ns', ...(workflow ? [limitField({ workflow }), limitField({ workflow, group: EVERY_GROUP })] : [])];
    if (workflow && group && group !== EVERY_GROUP) fields.push(limitField({ workflow, group }));
    const rates = workflow ? rateFields(workflow, group) : [];
    const origins = runtimeFields(workflow);
    const [values, setters] = await this.connections.command.call(
      'getLimits',
      (redis) =>
        Promise.all([
          redis.hmget(this.keys.limits, ...fields, ...rates),
          redis.hmget(this.keys.runtimeLimits, ...origins.map(([, field]) => field)),
        ]),
      { idempotent: true },
    );
    const setAtRuntime = toRuntimeOverrides(origins, setters);
    const [ns, wf, groupDefault, override] = values.slice(0, fields.length).map((v) => (v === null ? null : Number(v)));
    if (!workflow) return { namespace: ns, ...(setAtRuntime && { setAtRuntime }) };
    const [rate, rateMs, groupRate, groupRateMs, groupRateOverride, groupRateOverrideMs] = values.slice(fields.length);
    const limits: Limits = {
      namespace: ns,
      workflow: wf,
      groupDefault,
      rateLimit: toRateLimit(rate, rateMs),
      groupRateLimit: toRateLimit(groupRate, groupRateMs),
    };
    if (group && group !== EVERY_GROUP) {
      const rateOverride = toRateLimit(groupRateOverride, groupRateOverrideMs);
      Object.assign(limits, {
        groupOverride: override,
        group: override ?? groupDefault,
        groupRateOverride: rateOverride,
        groupRate: rateOverride ?? limits.groupRateLimit,
      });
    }
    if (setAtRuntime) limits.setAtRuntime = setAtRuntime;
    return limits;
  }
}
