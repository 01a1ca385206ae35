import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { EVERY_GROUP, limitField } from '../client/limits';
import { RESOLVED_QUEUE_OPTIONS } from '../queue.constants';
import type { ResolvedQueueOptions } from '../queue.options';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import { ActiveRuns } from './active-runs';
import { LeaseHeartbeat } from './lease.heartbeat';
import { RunEvents } from './run.events';
import { RunExecutor } from './run.executor';
import { WorkerLoop } from './worker.loop';

/**
 * Owns the worker's lifecycle. Bootstrap: write the declared caps to Redis, start the heartbeat
 * and the reserve loop. Shutdown: stop reserving, let in-flight runs finish until
 * `shutdownTimeoutMs`, then abort the rest and hand them back to the queue (no failure counted).
 */
@Injectable()
export class WorkerOrchestrator implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Sluice');
  private readonly keys: RedisKeys;
  private readonly active = new ActiveRuns();
  private loop?: WorkerLoop;
  private heartbeat?: LeaseHeartbeat;

  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly registry: WorkflowRegistry,
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScriptsProvider,
    private readonly events: RunEvents,
  ) {
    this.keys = new RedisKeys(options.prefix, options.namespace);
  }

  async onApplicationBootstrap(): Promise<void> {
    const workflows = this.registry.all();
    if (!this.options.worker.enabled || workflows.length === 0) return;
    await this.declareLimits();
    const scripts = this.scripts.get();
    this.heartbeat = new LeaseHeartbeat(scripts, this.keys, this.active, this.options.worker.lockMs);
    this.loop = new WorkerLoop({
      connections: this.connections,
      scripts,
      keys: this.keys,
      options: this.options,
      workflows: workflows.map((wf) => wf.name),
      active: this.active,
      makeExecutor: (commits) => new RunExecutor(scripts, this.keys, this.registry, this.options, this.events, commits),
    });
    this.heartbeat.start();
    this.loop.start();
    this.logger.log(`Worker started on ${this.keys.base} for ${workflows.map((wf) => wf.name).join(', ')} (concurrency ${this.options.worker.concurrency})`);
  }

  async beforeApplicationShutdown(): Promise<void> {
    if (!this.loop) return;
    await this.loop.stop();
    this.loop = undefined;
    if (!(await this.active.drained(this.options.worker.shutdownTimeoutMs))) await this.handBack();
    this.heartbeat?.stop();
  }

  /**
   * Registers this worker's workflows and writes the caps its code declares — namespace,
   * workflow, every group's default — so the latest bootstrap wins, and says so. Per-group
   * overrides are runtime settings (`setLimits`) and are left alone.
   */
  private async declareLimits(): Promise<void> {
    const workflows = this.registry.all();
    const cap = (limit?: number) => (limit === undefined ? '' : String(limit));
    const caps = [
      ...['ns', cap(this.options.concurrency), '', ''],
      ...workflows.flatMap((wf) => [
        ...[limitField({ workflow: wf.name }), cap(wf.concurrency), wf.name, ''],
        ...[limitField({ workflow: wf.name, group: EVERY_GROUP }), cap(wf.groupConcurrency), wf.name, EVERY_GROUP],
      ]),
    ];
    const names = workflows.map((wf) => wf.name);
    const changed = await this.scripts.get().run<string[]>('declare-limits', [this.keys.limits, this.keys.workflows, this.keys.seq], [
      this.keys.base, names.length, ...names, ...caps,
    ]);
    for (let i = 0; i < changed.length; i += 3) {
      this.logger.log(`Fleet-wide cap ${changed[i]} changed from ${changed[i + 1] || 'none'} to ${changed[i + 2] || 'none'}`);
    }
  }

  /** Shutdown deadline passed: abort what is still running and return it to the queue. */
  private async handBack(): Promise<void> {
    const scripts = this.scripts.get();
    const runs = this.active.list();
    this.logger.warn(`Shutdown deadline passed with ${runs.length} run(s) in flight; handing them back`);
    await Promise.all(
      runs.map(async (run) => {
        run.abort.abort(new Error('worker shutting down'));
        await scripts.run('release', [this.keys.run(run.id), this.keys.leases, this.keys.limits, this.keys.seq], [this.keys.base, run.id, run.token]);
      }),
    );
  }
}
