import { type DynamicModule, Module, type ModuleMetadata, type Provider } from '@nestjs/common';
import { QueueConfigError } from '../errors';
import { checkOptionKeys } from '../util/option-keys';
import { RouterModule } from '@nestjs/core';
import { DashboardAccessGuard } from './dashboard-access.guard';
import { DashboardActionGuard, DashboardSameSiteGuard } from './dashboard-action.guard';
import { DashboardActions } from './dashboard.actions';
import { DashboardActionsController } from './dashboard.actions.controller';
import { DashboardApiController } from './dashboard.api.controller';
import {
  DASHBOARD_OPTIONS,
  resolveDashboardOptions,
  type SluiceDashboardAsyncOptions,
  type SluiceDashboardOptions,
} from './dashboard.options';
import { DashboardPageController } from './dashboard.page.controller';
import { DashboardReader } from './dashboard.reader';
import { CompletedWatch } from './completed.watch';
import { DashboardAclRole } from './dashboard.acl';

const ASYNC_KEYS = ['path', 'imports', 'useFactory', 'inject'];

/**
 * The Sluice dashboard, mounted in any Nest HTTP app (Express or Fastify) next to `QueueModule`:
 * `SluiceDashboardModule.forRoot({ path: '/sluice', guard })`, or `forRootAsync`. Read-only unless
 * `readOnly: false`. Everything it shows and does goes through the app's `QueueClient`.
 */
@Module({})
export class SluiceDashboardModule {
  /**
   * Mounts the dashboard at `options.path` with these options.
   * @throws QueueConfigError for a bad value (e.g. a `path` that is not like `'/sluice'`)
   * @throws InvalidOptionError for an unknown key
   */
  static forRoot(options: SluiceDashboardOptions): DynamicModule {
    const resolved = resolveDashboardOptions(options);
    return SluiceDashboardModule.build(resolved.path, { provide: DASHBOARD_OPTIONS, useValue: resolved }, []);
  }

  /** The options from a factory (e.g. `readOnly` from `ConfigService`); `path` is fixed here. */
  static forRootAsync(options: SluiceDashboardAsyncOptions): DynamicModule {
    const { path } = resolveDashboardOptions({ path: options?.path });
    checkOptionKeys(options, ASYNC_KEYS, 'SluiceDashboardModule.forRootAsync options');
    if (typeof options.useFactory !== 'function')
      throw new QueueConfigError('SluiceDashboardModule.forRootAsync: useFactory must be a function');
    const provider: Provider = {
      provide: DASHBOARD_OPTIONS,
      useFactory: async (...args: unknown[]) => resolveDashboardOptions({ ...(await options.useFactory(...args)), path }),
      inject: options.inject ?? [],
    };
    return SluiceDashboardModule.build(path, provider, options.imports ?? []);
  }

  private static build(path: string, optionsProvider: Provider, imports: NonNullable<ModuleMetadata['imports']>): DynamicModule {
    return {
      module: SluiceDashboardModule,
      imports: [RouterModule.register([{ path, module: SluiceDashboardModule }]), ...imports],
      controllers: [DashboardPageController, DashboardApiController, DashboardActionsController],
      providers: [
        optionsProvider,
        DashboardAccessGuard,
        DashboardActionGuard,
        DashboardSameSiteGuard,
        DashboardReader,
        DashboardActions,
        CompletedWatch,
        DashboardAclRole,
      ],
    };
  }
}
