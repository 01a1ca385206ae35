import { randomUUID } from 'node:crypto';
import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { CascadeResumer } from './cascade.resumer';
import { RedisConnectionError, WorkerShutdownError } from '../errors';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import type { LocalWaits } from '../interfaces/local.waits';
import type { LocalWorker } from '../interfaces/local.worker';
import { MigrationRunner } from '../migration/migration.runner';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import { ActiveRuns } from './active-runs';
import { LeaseHeartbeat } from './lease.heartbeat';
import { CancelListener } from './cancel.listener';
import { WorkerChannels } from './worker.channels';
import { RunEvents } from './run.events';
import { RunExecutor } from './run.executor';
import { handBackRun } from './hand-back';
import { WorkerDeclarations } from './worker.declarations';
import { WorkerLoop } from './worker.loop';
import { retryInBackground } from '../util/retry';
import { OutageLog } from '../util/outage-log';
import { SchedulePlanner } from '../schedule/schedule.planner';
import { RunTelemetry } from '../telemetry/run.telemetry';
import { CLAIM_EXTRAS, handoffClaim } from '../redis/commands/claim.reply';
import { LayoutRefusedError } from '../redis/layout.gate';
import { CURRENT_LAYOUT, ROLLING_LAYOUT } from '../migration/layout.versions';

/** Bound of one hand-back at the shutdown deadline: shutdown must end whatever Redis does. */
const HAND_BACK_TIMEOUT_MS = 2_000;
/** Retry pauses while Redis is unreachable at bootstrap: doubling, jittered, up to this. */
const MAX_START_PAUSE_MS = 10_000;

/** Where the worker of this process is in its life (for health checks). */
export type WorkerState = 'disabled' | 'waiting-for-redis' | 'running' | 'stopping' | 'stopped';

/**
 * Owns the worker's lifecycle. Bootstrap: send the declared caps, rate limits and schedules (or,
 * for code that declares none, a check that Redis holds that already, in the first reserve) and
 * the loop's first reserve with the boot's first write, at the layouts this version runs on as
 * they are; once the namespace's key layout migration ({@link MigrationRunner}) is done and the
 * declarations written (again, if the layout refused them), let the loop's claims run and start
 * the heartbeat. If Redis is unreachable then, the app boots anyway and the worker migrates and
 * starts once Redis answers (retrying with jittered backoff; its failures logged as in OutageLog). Shutdown: stop
 * reserving, let in-flight runs finish until `shutdownTimeoutMs`, then abort the rest and hand
 * them back to the queue (no failure counted) — done within `shutdownTimeoutMs` plus a few seconds
 * whatever Redis does.
 */
@Injectable()
export class WorkerOrchestrator implements OnApplicationBootstrap, BeforeApplicationShutdown, LocalWorker {
  private readonly logger = new Logger('Sluice');
  private readonly active = new ActiveRuns();
  private loop?: WorkerLoop;
  /** Spans and metrics of this process's runs, with telemetry on. */
  private telemetry?: RunTelemetry;
  private heartbeat?: LeaseHeartbeat;
  /** This process's worker in the parked sets and on its handoff channel (see ParkAnnouncer). */
  readonly workerId = randomUUID();
  private channels?: WorkerChannels;
  private workerState: WorkerState = 'disabled';
  private lastStartError?: string;
  /** Resolves once the bootstrap's declarations are written: the loop's first claims wait for it (see LoopBoot). */
  private readonly ready: Promise<void>;
  private markReady!: () => void;
  private readonly declarations: WorkerDeclarations;

  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly registry: WorkflowRegistry,
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScriptsProvider,
    private readonly events: RunEvents,
    private readonly migration: MigrationRunner,
    private readonly keys: RedisKeys,
    /** This process's run() waits, told by the worker of the runs it completes (see LocalWaits). */
    private readonly localWaits?: LocalWaits,
  ) {
    this.ready = new Promise((resolve) => (this.markReady = resolve));
    this.declarations = new WorkerDeclarations({ options, registry, connections, scripts, keys });
  }

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
    this.workerState = 'waiting-for-redis';
    // The boot's Redis work leaves in one write, with the command connection's first check: the
    // server check and the layout's read (MigrationRunner), the declarations and the loop's first
    // reserve. Those two cannot wait for the read without a round trip each, so they are sent at
    // a layout this version works on as it is (the at-layout scripts check it first, in Redis):
    // at another (a namespace to migrate, or a newer one) they do nothing, and are sent again
    // once the migration is done; what the reserve claimed waits for the declarations.
    const atLayout = this.scripts.get().atLayout({ marker: this.keys.schema, lowest: ROLLING_LAYOUT, highest: CURRENT_LAYOUT });
    const migrated = this.migration.atBootstrap();
    // Subscribes as the subscriber connection comes up, once the first reserve's runs are done
    // (see BootQuiet); a cancel published before that reaches a run through the lease heartbeat's
    // beat at the subscription, which reports it cancelled (lua/extend-leases.lua).
    this.listen();
    const declare = () =>
      this.declarations.declare(true, atLayout).then(
        () => true,
        (error: unknown) => {
          if (error instanceof LayoutRefusedError) return false;
          throw error;
        },
      );
    // Code that declares nothing sends no declarations when Redis holds what they would write:
    // its first reserve checks that (see WorkerDeclarations.check), and they follow if not.
    const check = this.declarations.check();
    let settled!: (passed: boolean) => void;
    const declared = check ? new Promise<boolean>((resolve) => (settled = resolve)).then((passed) => passed || declare()) : declare();
    declared.catch(() => undefined); // looked at below, once the migration's outcome is in
    const loop = this.build();
    loop.start({ scripts: atLayout, ready: this.ready, declarations: check && { check, settled } });
    this.connections.openSubscriberOnceReachable(loop.bootQuiet.over);
    let now: boolean;
    try {
      now = await this.declaredAtBoot(migrated, declared);
    } catch (error) {
      // The bootstrap fails (a newer layout, a ScheduleConflictError…). Nest's app.close() would
      // rethrow it without the shutdown hooks: stop and close here (see MigrationRunner).
      await this.loop?.stop();
      this.heartbeat?.stop();
      this.channels?.stop();
      await this.connections.onApplicationShutdown().catch(() => undefined);
      throw error;
    }
    if (now) {
      this.startWorking();
    } else {
      // Started later, by a loop of its own: this one hands back what its first reserve may claim.
      void this.loop?.stop();
      this.loop = undefined;
      void this.startWhenRedisAnswers();
    }
  }

  /**
   * Waits for the boot's migration and declarations: true once both are done (the declarations
   * sent again if the layout refused them), false to start later (Redis away, or the migration
   * pending). Rejects if the bootstrap must fail.
   */
  private async declaredAtBoot(migrated: Promise<boolean>, declared: Promise<boolean>): Promise<boolean> {
    // Nest runs the module's bootstrap hooks side by side: await the migration's own promise, so
    // no worker starts on an older layout. A newer layout rejects it (the bootstrap fails).
    if (!(await migrated)) {
      this.lastStartError = 'the key layout migration is pending (see the warning logged at bootstrap)';
      return false;
    }
    try {
      // Fail fast when Redis refuses connections, so an HTTP app without Redis still boots at once.
      if (!(await declared)) await this.declarations.declare(true);
      return true;
    } catch (error) {
      if (!(error instanceof RedisConnectionError)) throw error;
      this.lastStartError = error.message;
      this.logger.warn(`Redis is not reachable at bootstrap (${error.message}); the worker starts as soon as it is`);
      return false;
    }
  }

  /** A run this process's enqueue handed to this worker, from the enqueue's reply (see LocalWorker). */
  handoff(workflow: string, token: string, runId: string, input: string): void {
    this.loop?.handedOff(handoffClaim(workflow, token, runId, input));
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

  /** The reserve loop, not started (and the heartbeat and telemetry, once). */
  private build(): WorkerLoop {
    const scripts = this.scripts.get();
    const planner = new SchedulePlanner(scripts, this.keys);
    const cascades = new CascadeResumer(scripts, this.keys, this.options.defaults.resultTtlMs);
    this.heartbeat ??= new LeaseHeartbeat(scripts, this.keys, this.active, this.options.worker.lockMs);
    const telemetry = (this.telemetry ??= RunTelemetry.create(
      this.options,
      this.registry.all().map((wf) => wf.name),
    ));
    return (this.loop = new WorkerLoop({
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
      localWaits: this.localWaits,
    }));
  }

  /** The declarations are written: what the loop claimed runs, and it claims on. */
  private startWorking(): void {
    if (this.workerState !== 'waiting-for-redis') return;
    if (!this.loop) this.build().start();
    this.heartbeat!.start();
    this.markReady();
    this.workerState = 'running';
    this.lastStartError = undefined;
    const names = this.registry.all().map((wf) => wf.name);
    this.logger.log(`Worker started for ${this.where()}: workflows ${names.join(', ')}; concurrency ${this.options.worker.concurrency}`);
  }

  /**
   * Subscribes, once, to the cancel channel (so a run it claims can be cancelled at once) and to
   * this worker's handoff channel (no handoff comes before the loop's first park announcement; one
   * after its stop is handed back by it).
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
      // A cancel published before: the heartbeat's lease check hears of it now rather than at its
      // next beat (a handoff published before reached no one, so its enqueue queued the run).
      () => this.active.size > 0 && void this.heartbeat?.beat(),
    );
    this.channels.start();
  }

  /** Retries the bootstrap's Redis work until it succeeds or the app shuts down; never throws. */
  private async startWhenRedisAnswers(): Promise<void> {
    const started = await retryInBackground(
      async () => {
        await this.migration.ensure();
        await this.declarations.declare(false);
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
