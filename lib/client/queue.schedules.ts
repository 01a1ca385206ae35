import { Inject, Injectable } from '@nestjs/common';
import { refuseBatchTarget } from '../workflow/batch.options';
import { FleetWorkflowLookup } from '../discovery/fleet-workflows.lookup';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import type { ScheduleInfo } from '../schedule/schedule-info';
import type { ScheduleOptions } from '../interfaces/schedule.options';
import { buildScheduleSpec } from '../workflow/schedule.check';
import { checkInput } from '../workflow/schema.validate';
import { ScheduleStore, type ListSchedulesOptions, type SchedulePage } from '../schedule/schedule.store';
import type { In, WorkflowRef } from './workflow.ref';

/**
 * The namespace's cron schedules, fleet-wide: create or replace, pause, resume, remove, read and
 * list them. Inject it anywhere once `QueueModule` is imported (`QueueClient` offers the same
 * calls as `schedule`, `unschedule`, `pauseSchedule`…). Schedules declared on
 * `@Workflow({ schedules })` are written by worker bootstraps; these calls manage any schedule.
 */
@Injectable()
export class QueueSchedules {
  private store?: ScheduleStore;

  /** @internal Nest constructs it from Sluice's internal services: inject `QueueSchedules` instead. */
  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly registry: WorkflowRegistry,
    private readonly fleet: FleetWorkflowLookup,
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScriptsProvider,
    private readonly keys: RedisKeys,
  ) {}

  /**
   * Creates or replaces a cron schedule: each occurrence starts one run of `workflow` with the
   * id `<id>@<occurrence ms>` (so a fire is idempotent), fired by the reserve calls the
   * workers already make — exactly once per occurrence across the fleet. Replacing a schedule
   * with a different definition restarts its plan from now; an unchanged one is left as it is.
   * A paused schedule stays paused.
   *
   * Schedules declared on `@Workflow({ schedules })` are rewritten by the next worker bootstrap:
   * make lasting changes to those in code.
   * @param id unique per namespace (letters, digits, `.`, `_`, `-`)
   * @throws InvalidScheduleError (cron or time zone), UnknownWorkflowError, InvalidNameError,
   *   InvalidOptionError, PayloadNotSerializableError / PayloadTooLargeError / InputValidationError
   *   (input, against the schema known here) before any Redis call; ScheduleConflictError if `id` belongs to another workflow (nothing written)
   */
  async set<W extends WorkflowRef>(id: string, workflow: W, opts: ScheduleOptions<In<W>>): Promise<ScheduleInfo<In<W>>> {
    const target = this.registry.resolve(workflow);
    refuseBatchTarget(target, 'workflow');
    const spec = buildScheduleSpec(id, target, opts, 'opts', this.options.maxPayloadBytes);
    // Each fire stores the input as is (null when none is given): that is what the worker validates.
    const checking = checkInput(target, opts.input === undefined ? null : opts.input, 'opts.input');
    if (checking) await checking;
    if (!target.known) await this.fleet.confirm(target.name, 'schedule');
    const store = this.schedules();
    await store.write(spec);
    return (await store.get(id)) as ScheduleInfo<In<W>>;
  }

  /** Deletes a schedule (runs it already started are left alone); `false` if there was none. */
  remove(id: string): Promise<boolean> {
    return this.schedules().remove(id);
  }

  /** Stops a schedule firing, fleet-wide, until {@link QueueSchedules.resume}. @throws ScheduleNotFoundError */
  pause(id: string): Promise<ScheduleInfo> {
    return this.schedules().pause(id);
  }

  /** Fires a paused schedule again from its next occurrence after now (none is owed for the pause). @throws ScheduleNotFoundError */
  resume(id: string): Promise<ScheduleInfo> {
    return this.schedules().resume(id);
  }

  /** A schedule with its next fire times, or `null`. */
  get<I = unknown>(id: string): Promise<ScheduleInfo<I> | null> {
    return this.schedules().get(id) as Promise<ScheduleInfo<I> | null>;
  }

  /** Schedules in id order, a page at a time (one call per page, whatever the total). */
  list(opts: ListSchedulesOptions = {}): Promise<SchedulePage> {
    return this.schedules().list(opts);
  }

  /** Made on first use: the scripts are read from disk only when needed. */
  private schedules(): ScheduleStore {
    return (this.store ??= new ScheduleStore(this.scripts.get(), this.connections.command, this.keys));
  }
}
