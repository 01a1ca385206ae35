import { InvalidOptionError, ScheduleConflictError, ScheduleNotFoundError, SluiceError } from '../errors';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import type { RedisLink } from '../redis/redis.link';
import { checkInteger } from '../util/duration';
import { checkName } from '../util/names';
import { planOccurrences } from '../workflow/cron.plan';
import type { ScheduleSpec } from '../workflow/schedule.check';
import { ScheduleInfo, toScheduleInfo } from './schedule-info';

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

/** A page of `listSchedules`. */
export interface SchedulePage {
  schedules: ScheduleInfo[];
  /** Pass as `cursor` for the next page; `null` after the last one. */
  cursor: string | null;
}

export interface ListSchedulesOptions {
  /** Only this workflow's schedules. */
  workflow?: string;
  /** From a previous page's `cursor`. */
  cursor?: string;
  /** Page size, 1 to 1,000 (default 100). */
  limit?: number;
}

const RESUME_TRIES = 5;

/**
 * The schedule operations on Redis (lua/schedule-*.lua), for `QueueClient` and the bootstrap's
 * declarations. Plans are computed here from Redis time (one TIME read), never the local clock.
 */
export class ScheduleStore {
  constructor(
    private readonly scripts: LuaScripts,
    private readonly link: RedisLink,
    private readonly keys: RedisKeys,
  ) {}

  /** Creates or updates one schedule; `ScheduleConflictError` if its id belongs to another workflow. */
  async write(spec: ScheduleSpec): Promise<ScheduleChange> {
    const changes = await this.writeMany('api', [spec], []);
    return changes[0].change;
  }

  /**
   * Writes the schedules a worker's code declares for `workflows`, and removes the code-declared
   * schedules of those workflows it no longer declares, unless a newer declaration declares them
   * (see lua/schedule-write.lua).
   */
  declare(specs: ScheduleSpec[], workflows: WorkflowDeclaration[]): Promise<Array<{ id: string; change: ScheduleChange }>> {
    return this.writeMany('code', specs, workflows);
  }

  /** Deletes a schedule; `false` if there was none. Runs it started are left alone. */
  async remove(id: string): Promise<boolean> {
    return (await this.control(checkName(id, 'id'), 'remove')) === 1;
  }

  async pause(id: string): Promise<ScheduleInfo> {
    if ((await this.control(checkName(id, 'id'), 'pause')) === 0) throw new ScheduleNotFoundError(id);
    return this.getOrThrow(id);
  }

  /** Resumes from now: occurrences that fell in the pause are not owed. */
  async resume(id: string): Promise<ScheduleInfo> {
    checkName(id, 'id');
    for (let attempt = 0; attempt < RESUME_TRIES; attempt++) {
      const [flat, now] = await Promise.all([this.read(id), this.redisNow()]);
      const info = toScheduleInfo(id, flat);
      if (!info) throw new ScheduleNotFoundError(id);
      if (!info.paused) return info;
      const rev = flat[flat.indexOf('rev') + 1];
      const plan = planOccurrences({ cron: info.cron, tz: info.tz, seed: id }, now);
      const done = await this.control(id, 'resume', [rev, plan.join(',')]);
      if (done === 0) throw new ScheduleNotFoundError(id);
      if (done !== -1) return this.getOrThrow(id);
    }
    throw new SluiceError(`schedule "${id}" kept changing while it was being resumed; try again`);
  }

  async get(id: string): Promise<ScheduleInfo | null> {
    return toScheduleInfo(checkName(id, 'id'), await this.read(id));
  }

  async list(opts: ListSchedulesOptions = {}): Promise<SchedulePage> {
    if (opts === null || typeof opts !== 'object') throw new InvalidOptionError('opts', 'must be an object { workflow?, cursor?, limit? }');
    const limit = opts.limit === undefined ? 100 : checkInteger(opts.limit, 'opts.limit', 1, 1_000);
    const cursor = opts.cursor === undefined ? '' : checkName(opts.cursor, 'opts.cursor');
    const key = opts.workflow === undefined ? this.keys.schedules : this.keys.workflow(checkName(opts.workflow, 'opts.workflow'), 'schedules');
    const [next, ...rows] = await this.scripts.run<[string, ...string[][]]>('schedule-list', [key], [this.keys.base, cursor, limit], { idempotent: true });
    const schedules = rows.map(([id, ...flat]) => toScheduleInfo(id, flat)).filter((info): info is ScheduleInfo => info !== null);
    return { schedules, cursor: next === '' ? null : next };
  }

  /** Milliseconds since the epoch by the Redis server's clock: the one all plans are computed from. */
  async redisNow(): Promise<number> {
    const [seconds, micros] = await this.link.call('schedule', (redis) => redis.time(), { idempotent: true });
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  private async writeMany(mode: 'api' | 'code', specs: ScheduleSpec[], workflows: WorkflowDeclaration[]): Promise<Array<{ id: string; change: ScheduleChange }>> {
    // A bootstrap that declares none still removes the ones its code dropped, but needs no plan.
    const now = specs.length > 0 ? await this.redisNow() : 0;
    const items = specs.flatMap((s) => [
      s.id, s.workflow, s.fingerprint, s.pattern.cron, s.pattern.tz ?? '', s.input, s.group, s.priority, s.attempts,
      s.overlap ? 1 : 0, s.catchUp, s.catchUpLimit, planOccurrences(s.pattern, now).join(','),
    ]);
    const reply = await this.scripts.run<string[]>('schedule-write', [this.keys.schedules], [
      this.keys.base, mode, specs.length, workflows.length, ...workflows.flatMap((d) => [d.workflow, d.fingerprint]), ...items,
    ], { idempotent: true });
    if (reply[0] === 'conflict') {
      const spec = specs.find((s) => s.id === reply[1])!;
      throw new ScheduleConflictError(reply[1], reply[2], spec.workflow);
    }
    const changes: Array<{ id: string; change: ScheduleChange }> = [];
    for (let i = 0; i < reply.length; i += 2) changes.push({ id: reply[i], change: reply[i + 1] as ScheduleChange });
    return changes;
  }

  private control(id: string, op: 'pause' | 'resume' | 'remove', extra: (string | number)[] = []): Promise<number> {
    return this.scripts.run<number>('schedule-control', [this.keys.schedules, this.keys.schedule(id)], [this.keys.base, id, op, ...extra], { idempotent: true });
  }

  private read(id: string): Promise<string[]> {
    return this.link.call('getSchedule', async (redis) => {
      const record = await redis.hgetall(this.keys.schedule(id));
      return Object.entries(record).flat();
    }, { idempotent: true });
  }

  private async getOrThrow(id: string): Promise<ScheduleInfo> {
    const info = await this.get(id);
    if (!info) throw new ScheduleNotFoundError(id);
    return info;
  }
}
