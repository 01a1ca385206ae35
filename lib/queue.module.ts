import { DynamicModule, Module, ModuleMetadata, Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { QueueAdmin } from './client/queue.admin';
import { QueueClient } from './client/queue.client';
import { QueueSchedules } from './client/queue.schedules';
import { RunAdmin } from './client/run.admin';
import { RunControl } from './client/run.control';
import { RunEnqueuer } from './client/run.enqueuer';
import { RunLimits } from './client/run.limits';
import { RunSignals } from './client/run.signals';
import { RunWaiter } from './client/run.waiter';
import { FleetWorkflowLookup } from './discovery/fleet-workflows.lookup';
import { QueueHealth } from './health/queue.health';
import { WorkflowMetadataAccessor } from './discovery/workflow-metadata.accessor';
import { WorkflowExplorer } from './discovery/workflow.explorer';
import { WorkflowRegistry } from './discovery/workflow.registry';
import { QUEUE_MODULE_OPTIONS, RESOLVED_QUEUE_OPTIONS } from './interfaces/queue.constants';
import { QueueModuleOptions, ResolvedQueueOptions, resolveQueueOptions } from './interfaces/queue.options';
import { MigrationRunner } from './migration/migration.runner';
import { NamespaceLayout } from './migration/namespace.layout';
import { LuaScriptsProvider } from './redis/lua-scripts.provider';
import { RedisConnections } from './redis/redis.connections';
import { RedisKeys } from './redis/redis.keys';
import { RunEvents } from './worker/run.events';
import { WorkerOrchestrator } from './worker/worker.orchestrator';
import { WorkflowEventAccessor } from './discovery/workflow-event.accessor';
import { WorkflowEventExplorer } from './worker/workflow-event.explorer';
import { RedisServerCheck } from './redis/redis-server.check';
import { QueueHealthIndicator } from './health/queue-health.indicator';
import { builtProvider } from './util/built.provider';

/** Options of `QueueModule.forRootAsync`, e.g. to read the connection from `ConfigService`. */
export interface QueueModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- mirrors Nest's FactoryProvider: the factory's arguments are whatever `inject` lists; public API
  useFactory: (...args: any[]) => QueueModuleOptions | Promise<QueueModuleOptions>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- mirrors Nest's FactoryProvider: the factory's arguments are whatever `inject` lists; public API
  inject?: any[];
}

// Sluice's own services are factory providers (see builtProvider): Nest need not scan them.
const CORE_PROVIDERS: Provider[] = [
  { provide: RESOLVED_QUEUE_OPTIONS, useFactory: resolveQueueOptions, inject: [QUEUE_MODULE_OPTIONS] },
  // The namespace's keys, made once for every provider that builds script calls or reads.
  {
    provide: RedisKeys,
    useFactory: (options: ResolvedQueueOptions) => new RedisKeys(options.prefix, options.namespace),
    inject: [RESOLVED_QUEUE_OPTIONS],
  },
  builtProvider(RedisConnections),
  builtProvider(LuaScriptsProvider),
  // One per process, shared by the client's services: a name found is asked about once.
  {
    provide: FleetWorkflowLookup,
    useFactory: (connections: RedisConnections, keys: RedisKeys) => new FleetWorkflowLookup(connections.command, keys),
    inject: [RedisConnections, RedisKeys],
  },
  builtProvider(WorkflowMetadataAccessor),
  builtProvider(WorkflowRegistry),
  builtProvider(WorkflowExplorer),
  builtProvider(RunWaiter),
  builtProvider(RunEnqueuer),
  builtProvider(RunSignals),
  builtProvider(RunAdmin),
  builtProvider(RunControl),
  builtProvider(RunLimits),
  builtProvider(QueueAdmin),
  builtProvider(QueueSchedules),
  builtProvider(QueueClient),
  builtProvider(RunEvents),
  builtProvider(MigrationRunner),
  builtProvider(NamespaceLayout),
  builtProvider(WorkerOrchestrator),
  builtProvider(QueueHealth),
  builtProvider(WorkflowEventAccessor),
  builtProvider(WorkflowEventExplorer),
  builtProvider(RedisServerCheck),
  builtProvider(QueueHealthIndicator),
];

/**
 * Sluice's Nest module. Import it once, in the root module; it is global, so `QueueClient`,
 * `QueueAdmin` and `QueueSchedules` can be injected anywhere and `@Workflow` providers of any
 * module are discovered.
 */
@Module({})
export class QueueModule {
  static forRoot(options: QueueModuleOptions): DynamicModule {
    return QueueModule.build([{ provide: QUEUE_MODULE_OPTIONS, useValue: options }], []);
  }

  static forRootAsync(options: QueueModuleAsyncOptions): DynamicModule {
    const provider: Provider = { provide: QUEUE_MODULE_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] };
    return QueueModule.build([provider], options.imports ?? []);
  }

  private static build(optionsProviders: Provider[], imports: NonNullable<ModuleMetadata['imports']>): DynamicModule {
    return {
      global: true,
      module: QueueModule,
      imports: [DiscoveryModule, ...imports],
      providers: [...optionsProviders, ...CORE_PROVIDERS],
      exports: [QueueClient, QueueAdmin, QueueSchedules, RunEvents, QueueHealth, QueueHealthIndicator],
    };
  }
}
