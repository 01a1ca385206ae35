import { DynamicModule, Module, ModuleMetadata, Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { QueueAdmin } from './client/queue.admin';
import { QueueClient } from './client/queue.client';
import { QueueSchedules } from './client/queue.schedules';
import { QueueHealthIndicator } from './health/queue-health.indicator';
import { QueueHealth } from './health/queue.health';
import { QUEUE_MODULE_OPTIONS, RESOLVED_QUEUE_OPTIONS } from './interfaces/queue.constants';
import { QueueModuleOptions, resolveQueueOptions } from './interfaces/queue.options';
import { SLUICE_PROVIDERS } from './sluice.services';
import { RunEvents } from './worker/run.events';
import { checkOptionKeys } from './util/option-keys';

/** Options of `QueueModule.forRootAsync`, e.g. to read the connection from `ConfigService`. */
export interface QueueModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  /** Returns (or resolves to) the module's options; called with the providers `inject` lists. Its options are checked at bootstrap. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- mirrors Nest's FactoryProvider: the factory's arguments are whatever `inject` lists; public API
  useFactory: (...args: any[]) => QueueModuleOptions | Promise<QueueModuleOptions>;
  /** The providers (tokens) whose instances `useFactory` receives, in order, e.g. `[ConfigService]`. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- mirrors Nest's FactoryProvider: the factory's arguments are whatever `inject` lists; public API
  inject?: any[];
}

// Sluice's own services are built in one factory (see SluiceServices): Nest resolves few edges.
const CORE_PROVIDERS: Provider[] = [
  { provide: RESOLVED_QUEUE_OPTIONS, useFactory: resolveQueueOptions, inject: [QUEUE_MODULE_OPTIONS] },
  ...SLUICE_PROVIDERS,
];

/**
 * Sluice's Nest module. Import it once, in the root module; it is global, so `QueueClient`,
 * `QueueAdmin` and `QueueSchedules` can be injected anywhere and `@Workflow` providers of any
 * module are discovered.
 */
@Module({})
export class QueueModule {
  /**
   * Registers Sluice with these options. They are checked when the app bootstraps: a bad value
   * fails it with `QueueConfigError`, an unknown key with `InvalidOptionError`.
   */
  static forRoot(options: QueueModuleOptions): DynamicModule {
    return QueueModule.build([{ provide: QUEUE_MODULE_OPTIONS, useValue: options }], []);
  }

  /**
   * Registers Sluice with options a factory returns, e.g. from `ConfigService`.
   * @throws InvalidOptionError for a key other than `imports`, `useFactory` and `inject` (the factory's options are checked at bootstrap)
   */
  static forRootAsync(options: QueueModuleAsyncOptions): DynamicModule {
    checkOptionKeys(options, ['imports', 'useFactory', 'inject'], 'QueueModule.forRootAsync options');
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
