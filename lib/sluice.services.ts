import type {
  BeforeApplicationShutdown,
  FactoryProvider,
  InjectionToken,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import { DiscoveryService, MetadataScanner, ModuleRef } from '@nestjs/core';
import { QueueAdmin } from './client/queue.admin';
import { QueueClient } from './client/queue.client';
import { QueueSchedules } from './client/queue.schedules';
import { RunAdmin } from './client/run.admin';
import { RunControl } from './client/run.control';
import { RunEnqueuer } from './client/run.enqueuer';
import { RunLimits } from './client/run.limits';
import { RunSignals } from './client/run.signals';
import { EventPublisher } from './client/event.publisher';
import { RunWaiter } from './client/run.waiter';
import { FleetWorkflowLookup } from './discovery/fleet-workflows.lookup';
import { WorkflowEventAccessor } from './discovery/workflow-event.accessor';
import { WorkflowMetadataAccessor } from './discovery/workflow-metadata.accessor';
import { WorkflowExplorer } from './discovery/workflow.explorer';
import { WorkflowRegistry } from './discovery/workflow.registry';
import { QueueHealthIndicator } from './health/queue-health.indicator';
import { QueueHealth } from './health/queue.health';
import { RESOLVED_QUEUE_OPTIONS } from './interfaces/queue.constants';
import type { ResolvedQueueOptions } from './interfaces/queue.options';
import { MigrationRunner } from './migration/migration.runner';
import { NamespaceLayout } from './migration/namespace.layout';
import { AclCheck } from './redis/acl.check';
import { LuaScriptsProvider } from './redis/lua-scripts.provider';
import { RedisServerCheck } from './redis/redis-server.check';
import { RedisConnections } from './redis/redis.connections';
import { RedisKeys } from './redis/redis.keys';
import { RunEvents } from './worker/run.events';
import { WorkerOrchestrator } from './worker/worker.orchestrator';
import { WorkflowEventExplorer } from './worker/workflow-event.explorer';

/**
 * Sluice's services of one app, built with `new` in one place (the composition root), rather
 * than each registered with Nest and wired by its injector, and given their lifecycle hooks here.
 *
 * Why: Nest's injector pays per provider and per dependency edge it resolves, at every app
 * creation, and every lifecycle phase walks every provider it knows: with Sluice's 28 services
 * and their hundred-odd edges (QueueClient alone takes ten) that was most of what the module
 * added to a bootstrap. Measured with empty factory providers of one edge each: 17 of them take
 * about 0.4 ms more to create and initialise than one. So Nest knows this one provider, which
 * holds the hooks of every service that has one (in the order written below, not in whatever
 * order Nest would call them in), and one token per exported service (see
 * {@link SLUICE_PROVIDERS}), each a factory of one edge. A factory provider is injected, given its
 * lifecycle hooks and found by `app.get` like a class provider, and it is not scanned for guards,
 * interceptors and pipes method by method (Nest does that for every class provider; these have
 * none). Other services are reached through this object (`app.get(SluiceServices).connections`).
 */
export class SluiceServices implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  readonly keys: RedisKeys;
  readonly connections: RedisConnections;
  readonly scripts: LuaScriptsProvider;
  readonly registry: WorkflowRegistry;
  readonly explorer: WorkflowExplorer;
  readonly events: RunEvents;
  readonly eventExplorer: WorkflowEventExplorer;
  readonly waiter: RunWaiter;
  readonly control: RunControl;
  readonly schedules: QueueSchedules;
  readonly admin: QueueAdmin;
  readonly client: QueueClient;
  readonly migration: MigrationRunner;
  readonly acl: AclCheck;
  readonly orchestrator: WorkerOrchestrator;
  readonly health: QueueHealth;
  readonly healthIndicator: QueueHealthIndicator;

  constructor(
    options: ResolvedQueueOptions,
    private readonly discovery: DiscoveryService,
    scanner: MetadataScanner,
    moduleRef: ModuleRef,
  ) {
    const keys = (this.keys = new RedisKeys(options.prefix, options.namespace));
    const connections = (this.connections = new RedisConnections(options, keys));
    const scripts = (this.scripts = new LuaScriptsProvider(connections, keys));
    const accessor = new WorkflowMetadataAccessor();
    const registry = (this.registry = new WorkflowRegistry(options, accessor));
    this.explorer = new WorkflowExplorer(accessor, registry);
    const events = (this.events = new RunEvents());
    this.eventExplorer = new WorkflowEventExplorer(scanner, new WorkflowEventAccessor(), events, registry, options);
    // One per app, shared by the client's services: a name found is asked about once.
    const fleet = new FleetWorkflowLookup(connections.command, keys);
    const layout = new NamespaceLayout();
    this.waiter = new RunWaiter(connections, scripts, keys);
    this.control = new RunControl(scripts, keys, options);
    const runs = new RunAdmin(scripts, keys, registry, fleet);
    const limits = new RunLimits(scripts, connections, keys);
    this.admin = new QueueAdmin(options, registry, fleet, connections, scripts, keys, runs, this.control, limits, layout);
    this.schedules = new QueueSchedules(options, registry, fleet, connections, scripts, keys);
    // A process that runs a worker is checked against the worker's ACL rule (see AclCheck).
    const runsWorker = () => options.worker.enabled && registry.all().length > 0;
    this.acl = new AclCheck(connections, scripts, keys, options, runsWorker);
    const serverCheck = new RedisServerCheck(connections, options, this.acl);
    this.migration = new MigrationRunner(options, registry, connections, scripts, serverCheck, layout);
    // The worker and the client know each other only as LocalWaits and LocalWorker.
    this.orchestrator = new WorkerOrchestrator(
      options,
      registry,
      connections,
      scripts,
      events,
      this.migration,
      keys,
      this.waiter.localWaits,
    );
    // Only a worker that runs here can be handed runs (a disabled one never parks).
    const enqueuer = new RunEnqueuer(options, scripts, keys, layout, options.worker.enabled ? this.orchestrator : undefined);
    const signals = new RunSignals(scripts, keys, options);
    const publisher = new EventPublisher(options, registry, scripts, keys, connections, enqueuer, signals);
    this.client = new QueueClient(
      options,
      registry,
      connections,
      keys,
      fleet,
      enqueuer,
      this.waiter,
      signals,
      this.admin,
      this.schedules,
      publisher,
    );
    this.health = new QueueHealth(connections, this.orchestrator, options);
    this.healthIndicator = new QueueHealthIndicator(this.health, moduleRef);
  }

  /** Finds the app's workflows, then its `@OnWorkflowEvent` handlers, in one scan of its providers. */
  onModuleInit(): void {
    const wrappers = [...this.discovery.getProviders(), ...this.discovery.getControllers()];
    this.explorer.explore(wrappers);
    this.eventExplorer.explore(wrappers);
  }

  /**
   * The migration and the worker's start, side by side (the worker awaits the migration's own
   * promise before it claims: see WorkerOrchestrator), after the event handlers' filters are checked.
   */
  async onApplicationBootstrap(): Promise<void> {
    this.eventExplorer.checkFilters();
    await Promise.all([this.migration.onApplicationBootstrap(), this.orchestrator.onApplicationBootstrap()]);
  }

  /** Waits are settled and the migration's retries stopped while the worker drains. */
  async beforeApplicationShutdown(): Promise<void> {
    this.waiter.beforeApplicationShutdown();
    this.migration.beforeApplicationShutdown();
    await this.orchestrator.beforeApplicationShutdown();
  }

  /** Last: the connections close once everything that used them has stopped. */
  onApplicationShutdown(): Promise<void> {
    return this.connections.onApplicationShutdown();
  }
}

/** A token Nest resolves to one of the app's {@link SluiceServices}. */
function service<T>(token: InjectionToken, pick: (services: SluiceServices) => T): FactoryProvider<T> {
  return { provide: token, useFactory: pick, inject: [SluiceServices] };
}

/**
 * What `QueueModule` registers besides its options: the services (which carry every lifecycle
 * hook), a token for each service that is exported (the public API), and the three the dashboard
 * looks up (a layer above, it cannot import this file).
 */
export const SLUICE_PROVIDERS: FactoryProvider[] = [
  {
    provide: SluiceServices,
    useFactory: (options: ResolvedQueueOptions, discovery: DiscoveryService, scanner: MetadataScanner, moduleRef: ModuleRef) =>
      new SluiceServices(options, discovery, scanner, moduleRef),
    inject: [RESOLVED_QUEUE_OPTIONS, DiscoveryService, MetadataScanner, ModuleRef],
  },
  service(RedisKeys, (s) => s.keys),
  service(RedisConnections, (s) => s.connections),
  service(AclCheck, (s) => s.acl),
  service(RunEvents, (s) => s.events),
  service(QueueAdmin, (s) => s.admin),
  service(QueueSchedules, (s) => s.schedules),
  service(QueueClient, (s) => s.client),
  service(QueueHealth, (s) => s.health),
  service(QueueHealthIndicator, (s) => s.healthIndicator),
];
