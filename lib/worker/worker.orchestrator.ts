import { randomUUID } from 'node:crypto';
import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { CascadeResumer } from './cascade.resumer';
import { EVERY_GROUP, limitField } from '../interfaces/limits';
import { activateGroups } from '../redis/commands/activate-groups.command';
import { RedisConnectionError, WorkerShutdownError } from '../errors';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { MigrationRunner } from '../migration/migration.runner';
import { type CapDeclaration, declareLimits } from '../redis/commands/declare-limits.command';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import { ActiveRuns } from './active-runs';
import { LeaseHeartbeat } from './lease.heartbeat';
import { CancelListener } from './cancel.listener';
import { WorkerChannels } from './worker.channels';
import { declareRateLimits, logDeclaration } from './rate-limits.declarer';
import { RunEvents } from './run.events';
import { RunExecutor } from './run.executor';
import { handBackRun } from './hand-back';
import { WorkerLoop } from './worker.loop';
import { retryInBackground } from '../util/retry';
import { OutageLog } from '../util/outage-log';
import { declaredScheduleSpecs, declareSchedules } from '../schedule/schedule.declarer';
import { SchedulePlanner } from '../schedule/schedule.planner';
import { ScheduleStore } from '../schedule/schedule.store';
import { RunTelemetry } from '../telemetry/run.telemetry';
import { CLAIM_EXTRAS } from '../redis/commands/claim.reply';

/** Bound of one hand-back at the shutdown deadline: shutdown must end whatever Redis does. */
const HAND_BACK_TIMEOUT_MS = 2_000;
/** Retry pauses while Redis is unreachable at bootstrap: doubling, jittered, up to this. */
const MAX_START_PAUSE_MS = 10_000;

/** Where the worker of this process is in its life (for health checks). */
export type WorkerState = 'disabled' | 'waiting-for-redis' | 'running' | 'stopping' | 'stopped';

/**
 * Owns the worker's lifecycle. Bootstrap: wait for the namespace's key layout migration
 * ({@link MigrationRunner}), write the declared caps and schedules to Redis, start the heartbeat and the
 * reserve loop. If Redis is unreachable then, the app boots anyway and the worker migrates and
 * starts once Redis answers (retrying with jittered backoff; its failures logged as in OutageLog). Shutdown: stop
 * reserving, let in-flight runs finish until `shutdownTimeoutMs`, then abort the rest and hand
 * them back to the queue (no failure counted) — done within `shutdownTimeoutMs` plus a few seconds
 * whatever Redis does.
 */
@Injectable()
export class WorkerOrchestrator implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Sluice');
  private readonly active = new ActiveRuns();
  private loop?: WorkerLoop;
  /** Spans and metrics of this process's runs, with telemetry on. */
  private telemetry?: RunTelemetry;
  private heartbeat?: LeaseHeartbeat;
  /** This process's worker in the parked sets and on its handoff channel (see ParkAnnouncer). */
  private readonly workerId = randomUUID();
  private channels?: WorkerChannels;
  private workerState: WorkerState = 'disabled';
  private lastStartError?: string;

  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly registry: WorkflowRegistry,
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScriptsProvider,
    private readonly events: RunEvents,
    private readonly migration: MigrationRunner,
    private readonly keys: RedisKeys,
  ) {}

  /** The worker's state, and why it is not running yet if Redis was away at bootstrap. */
  get state(): { state: WorkerState; lastWakeAt?: number; lastOkAt?: number; lastLoopError?: string; error?: string } {
    const loop = this.loop;
    return {
      state: this.workerState,
      lastWakeAt: loop?.lastWakeAt,
      lastOkAt: loop?.lastOkAt,
      ...(loop?.lastError && { lastLoopError: loop.lastError }),
      ...(this.lastStartError && { error: this.lastStartError }),
    };
  }

  async onApplicationBootstrap(): Promise<void> {
    const workflows = this.registry.all();
    if (!this.options.worker.enabled || workflows.length === 0) {
      const why = this.options.worker.enabled ? 'no @Workflow providers in this app' : 'worker.enabled is false';
      this.logger.log(`Producer started for ${this.where()}: no worker in this process (${why})`);
      return;
    }
    this.connections.openAllOnceReachable();
    // Nest runs the module's bootstrap hooks side by side: await the migration's own promise, so
    // no worker starts on an older layout. A newer layout rejects it (the bootstrap fails).
    const migrated = await this.migration.atBootstrap();
    this.workerState = 'waiting-for-redis';
    if (migrated) {
      // Redis answered (the worker's other connections are open or opening, see
      // openAllOnceReachable): subscribe before the first reserve.
      this.listen();
    } else {
      this.lastStartError = 'the key layout migration is pending (see the warning logged at bootstrap)';
      void this.startWhenRedisAnswers();
      return;
    }
    try {
      // Fail fast when Redis refuses connections, so an HTTP app without Redis still boots at once.
      await this.declare(true);
    } catch (error) {
      if (!(error instanceof RedisConnectionError)) {
        // The bootstrap fails (e.g. ScheduleConflictError). Nest's app.close() would rethrow it
        // without the shutdown hooks: close the connections here (see MigrationRunner).
        this.channels?.stop();
        await this.connections.onApplicationShutdown().catch(() => undefined);
        throw error;
      }
      this.lastStartError = error.message;
      this.logger.warn(`Redis is not reachable at bootstrap (${error.message}); the worker starts as soon as it is`);
      void this.startWhenRedisAnswers();
      return;
    }
    this.startWorking();
  }

  async beforeApplicationShutdown(): Promise<void> {
    if (this.workerState === 'disabled') {
      this.logger.log(`Producer stopped for ${this.where()}`);
      return;
    }
    this.workerState = 'stopping';
    if (this.loop) {
      await this.loop.stop();
      this.logger.log(
        `Worker stopping for ${this.where()}: draining ${this.active.size} run(s) in flight (up to ${this.options.worker.shutdownTimeoutMs} ms)`,
      );
      if (!(await this.active.drained(this.options.worker.shutdownTimeoutMs))) await this.handBack();
    }
    this.heartbeat?.stop();
    this.channels?.stop();
    this.telemetry?.close();
    this.workerState = 'stopped';
    this.logger.log(
      `Worker stopped for ${this.where()}${this.loop ? '' : ` (it never started: ${this.lastStartError ?? 'Redis did not answer'})`}`,
    );
  }

  /** How the lifecycle lines name this process's queue. */
  private where(): string {
    return `namespace ${this.options.namespace} (prefix ${this.options.prefix})`;
  }

  private startWorking(): void {
    if (this.workerState !== 'waiting-for-redis') return;
    const scripts = this.scripts.get();
    const planner = new SchedulePlanner(scripts, this.keys);
    const cascades = new CascadeResumer(scripts, this.keys, this.options.defaults.resultTtlMs);
    this.heartbeat = new LeaseHeartbeat(scripts, this.keys, this.active, this.options.worker.lockMs);
    this.listen();
    const telemetry = (this.telemetry = RunTelemetry.create(
      this.options,
      this.registry.all().map((wf) => wf.name),
    ));
    this.loop = new WorkerLoop({
      connections: this.connections,
      scripts,
      keys: this.keys,
      options: this.options,
      workflows: this.registry.all().map((wf) => wf.name),
      workerId: this.workerId,
      active: this.active,
      makeExecutor: (commits) => new RunExecutor(scripts, this.keys, this.registry, this.options, this.events, commits, telemetry),
      refreshLease: (run) => void this.heartbeat?.extend([run]),
      answerPlanRequests: (now, requests) => planner.answer(now, requests),
      events: this.events,
      resumeCascade: (runId) => cascades.resume(runId),
      // Not with the API installed but no SDK registered: nothing would read a claim's extras.
      claimExtras: () => (telemetry?.recording() ? CLAIM_EXTRAS : 0),
    });
    this.heartbeat.start();
    this.loop.start();
    this.workerState = 'running';
    this.lastStartError = undefined;
    const names = this.registry.all().map((wf) => wf.name);
    this.logger.log(`Worker started for ${this.where()}: workflows ${names.join(', ')}; concurrency ${this.options.worker.concurrency}`);
  }

  /**
   * Subscribes, once, to the cancel channel (before the first reserve, so a run it claims can be
   * cancelled at once) and to this worker's handoff channel (no handoff comes before the loop's
   * first park announcement; one after its stop is handed back by it).
   */
  private listen(): void {
    if (this.channels) return;
    const cancels = new CancelListener(this.active);
    this.channels = new WorkerChannels(
      this.connections.subscriber,
      this.connections.channels,
      new Map([
        [this.keys.cancel, (message: string) => cancels.onCancel(message)],
        [this.keys.handoff(this.workerId), (message: string) => this.loop?.handoffPublished(message)],
      ]),
    );
    this.channels.start();
  }

  /** Retries the bootstrap's Redis work until it succeeds or the app shuts down; never throws. */
  private async startWhenRedisAnswers(): Promise<void> {
    const started = await retryInBackground(
      async () => {
        await this.migration.ensure();
        await this.declare(false);
      },
      {
        stopped: () => this.workerState !== 'waiting-for-redis',
        log: new OutageLog(this.logger),
        describe: (error) => `Worker still waiting for Redis: ${(this.lastStartError = error.message)}`,
        maxPauseMs: MAX_START_PAUSE_MS,
      },
    );
    if (started) this.startWorking();
  }

  /**
   * The bootstrap's writes: caps, rate limits and schedules (all checked before the first write).
   * They touch separate fields and keys, so their calls go out together over the command
   * connection, in that order and in one write, and are waited for together: one round trip, not
   * one each.
   */
  private async declare(failFast: boolean): Promise<void> {
    const workflows = this.registry.all();
    const schedules = declaredScheduleSpecs(workflows, this.options.maxPayloadBytes);
    const store = new ScheduleStore(this.scripts.get(), this.connections.command, this.keys);
    await this.connections.command.together(() =>
      Promise.all([
        this.declareLimits(failFast),
        declareRateLimits(this.scripts.get(), this.keys, workflows, this.logger),
        declareSchedules(
          store,
          schedules,
          workflows.map((wf) => wf.name),
          this.logger,
        ),
      ]),
    );
  }

  /**
   * Registers this worker's workflows and writes the caps its code declares — namespace,
   * workflow, every group's default — so the latest bootstrap wins among declarations, and says
   * so. A cap an operator set at runtime (`setLimits`) stays while the code still declares what it
   * overrode, and gives way to a changed declaration (lua/includes/origins.lua). Per-group
   * overrides are runtime settings and are left alone.
   */
  private async declareLimits(failFast: boolean): Promise<void> {
    const workflows = this.registry.all();
    const cap = (limit?: number) => (limit === undefined ? '' : String(limit));
    const caps: CapDeclaration[] = [
      { field: 'ns', limit: cap(this.options.concurrency), workflow: '', group: '' },
      ...workflows.flatMap((wf) => [
        { field: limitField({ workflow: wf.name }), limit: cap(wf.concurrency), workflow: wf.name, group: '' },
        {
          field: limitField({ workflow: wf.name, group: EVERY_GROUP }),
          limit: cap(wf.groupConcurrency),
          workflow: wf.name,
          group: EVERY_GROUP,
        },
        // Retention by count, read by countFinished (lua/includes/finish.lua) when runs finish.
        { field: `wf:${wf.name}:keep:completed`, limit: cap(wf.keep?.completed), workflow: wf.name, group: '' },
        { field: `wf:${wf.name}:keep:failed`, limit: cap(wf.keep?.failed), workflow: wf.name, group: '' },
        // Whether complete indexes the workflow's runs (lua/includes/finish.lua countFinished).
        { field: `wf:${wf.name}:index-completed`, limit: wf.indexCompleted ? '1' : '', workflow: wf.name, group: '' },
      ]),
    ];
    const names = workflows.map((wf) => wf.name);
    const scripts = this.scripts.get();
    const changed = await declareLimits(scripts, this.keys, names, caps, { failFast });
    const groupDefaults = new Map(names.map((name) => [limitField({ workflow: name, group: EVERY_GROUP }), name]));
    for (const { field, previous, next, outcome, declared } of changed) {
      logDeclaration(this.logger, `cap ${field}`, previous || 'none', next || 'none', outcome, declared || 'none');
      // A raised or removed default of every group: the groups it held back rejoin, in batches.
      const raised = previous !== next && (next === '' || (previous !== '' && Number(next) > Number(previous)));
      const workflow = groupDefaults.get(field);
      if (workflow !== undefined && raised) await activateGroups(scripts, this.keys, workflow);
    }
  }

  /** Shutdown deadline passed: abort what is still running and return it to the queue (bounded). */
  private async handBack(): Promise<void> {
    const scripts = this.scripts.get();
    const runs = this.active.list();
    this.logger.warn(`Shutdown deadline passed with ${runs.length} run(s) in flight; handing them back`);
    await Promise.allSettled(
      runs.map(async (run) => {
        // Its executor, seeing this reason, commits no failure for what the code throws now (see RunExecutor).
        run.abort.abort(new WorkerShutdownError(run.id));
        await handBackRun(scripts, this.keys, run, { idempotent: true, timeoutMs: HAND_BACK_TIMEOUT_MS });
      }),
    );
  }
}
