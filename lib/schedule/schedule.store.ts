import { InvalidOptionError, ScheduleConflictError, ScheduleNotFoundError, SluiceError } from '../errors';
import { controlSchedule, type ScheduleControl, type ScheduleControlOutcome } from '../redis/commands/schedule-control.command';
import { listSchedules } from '../redis/commands/schedule-list.command';
import { type ScheduleChange, type WorkflowDeclaration, writeSchedules } from '../redis/commands/schedule-write.command';
import type { ScriptRunner } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import type { RedisLink } from '../redis/redis.link';
import { checkInteger } from '../util/duration';
import { checkName } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';
import { planOccurrences } from '../workflow/cron.plan';
import type { ScheduleSpec } from '../workflow/schedule.check';
import { ScheduleInfo, scheduleFields, toScheduleInfo } from './schedule-info';

/** A page of `listSchedules`. */
export interface SchedulePage {
  /** The schedules of this page, in id order. */
  schedules: ScheduleInfo[];
  /** Pass as `cursor` for the next page; `null` after the last one. */
  cursor: string | null;
}

/** Options of `QueueClient.listSchedules`. */
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
    private readonly scripts: ScriptRunner,
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
    return (await this.control(checkName(id, 'id'), { op: 'remove' })) === 'done';
  }

  async pause(id: string): Promise<ScheduleInfo> {
    if ((await this.control(checkName(id, 'id'), { op: 'pause' })) === 'missing') throw new ScheduleNotFoundError(id);
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
      const { cron, rev } = scheduleFields(flat);
      const plan = planOccurrences({ cron, tz: info.tz, seed: id }, now);
      const done = await this.control(id, { op: 'resume', rev, plan });
      if (done === 'missing') throw new ScheduleNotFoundError(id);
      if (done !== 'stale') return this.getOrThrow(id);
    }
    throw new SluiceError(`schedule "${id}" kept changing while it was being resumed; try again`);
  }

  async get(id: string): Promise<ScheduleInfo | null> {
    return toScheduleInfo(checkName(id, 'id'), await this.read(id));
  }

  async list(opts: ListSchedulesOptions = {}): Promise<SchedulePage> {
    if (opts === null || typeof opts !== 'object') throw new InvalidOptionError('opts', 'must be an object { workflow?, cursor?, limit? }');
    checkOptionKeys(opts, ['workflow', 'cursor', 'limit'], 'listSchedules opts');
    const limit = opts.limit === undefined ? 100 : checkInteger(opts.limit, 'opts.limit', 1, 1_000);
    const cursor = opts.cursor === undefined ? '' : checkName(opts.cursor, 'opts.cursor');
    const workflow = opts.workflow === undefined ? undefined : checkName(opts.workflow, 'opts.workflow');
    const { rows, next } = await listSchedules(this.scripts, this.keys, { workflow, cursor, limit });
    const schedules = rows.map(({ id, flat }) => toScheduleInfo(id, flat)).filter((info): info is ScheduleInfo => info !== null);
    return { schedules, cursor: next };
  }

  /** Milliseconds since the epoch by the Redis server's clock: the one all plans are computed from. */
  async redisNow(): Promise<number> {
    const [seconds, micros] = await this.link.call('schedule', (redis) => redis.time(), { idempotent: true });
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  private async writeMany(
    mode: 'api' | 'code',
    specs: ScheduleSpec[],
    workflows: WorkflowDeclaration[],
  ): Promise<Array<{ id: string; change: ScheduleChange }>> {
    // A bootstrap that declares none still removes the ones its code dropped, but needs no plan.
    const now = specs.length > 0 ? await this.redisNow() : 0;
    const records = specs.map(({ pattern, ...s }) => ({
      ...s,
      cron: pattern.cron,
      tz: pattern.tz ?? '',
      plan: planOccurrences(pattern, now),
    }));
    const written = await writeSchedules(this.scripts, this.keys, mode, records, workflows);
    if ('conflict' in written) {
      const { id, owner } = written.conflict;
      throw new ScheduleConflictError(id, owner, specs.find((s) => s.id === id)!.workflow);
    }
    return written.changes;
  }

  private control(id: string, control: ScheduleControl): Promise<ScheduleControlOutcome> {
    return controlSchedule(this.scripts, this.keys, id, control);
  }

  private read(id: string): Promise<string[]> {
    return this.link.call(
      'getSchedule',
      async (redis) => {
        const record = await redis.hgetall(this.keys.schedule(id));
        return Object.entries(record).flat();
      },
      { idempotent: true },
    );
  }

  private async getOrThrow(id: string): Promise<ScheduleInfo> {
    const info = await this.get(id);
    if (!info) throw new ScheduleNotFoundError(id);
    return info;
  }
}
