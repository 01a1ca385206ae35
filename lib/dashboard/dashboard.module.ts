import { type DynamicModule, Module } from '@nestjs/common';
import { RouterModule } from '@nestjs/core';
import { DashboardAccessGuard } from './dashboard-access.guard';
import { DashboardActionGuard, DashboardSameSiteGuard } from './dashboard-action.guard';
import { DashboardActions } from './dashboard.actions';
import { DashboardActionsController } from './dashboard.actions.controller';
import { DashboardApiController } from './dashboard.api.controller';
import { DASHBOARD_OPTIONS, resolveDashboardOptions, type SluiceDashboardOptions } from './dashboard.options';
import { DashboardPageController } from './dashboard.page.controller';
import { DashboardReader } from './dashboard.reader';

/**
 * The Sluice dashboard, mounted in any Nest HTTP app (Express or Fastify) next to
 * `QueueModule`: `SluiceDashboardModule.forRoot({ path: '/sluice', guard })`. Read-only unless
 * `readOnly: false`. Everything it shows and does goes through the app's `QueueClient`.
 */
@Module({})
export class SluiceDashboardModule {
  static forRoot(options: SluiceDashboardOptions): DynamicModule {
    const resolved = resolveDashboardOptions(options);
    return {
      module: SluiceDashboardModule,
      imports: [RouterModule.register([{ path: resolved.path, module: SluiceDashboardModule }])],
      controllers: [DashboardPageController, DashboardApiController, DashboardActionsController],
      providers: [{ provide: DASHBOARD_OPTIONS, useValue: resolved }, DashboardAccessGuard, DashboardActionGuard, DashboardSameSiteGuard, DashboardReader, DashboardActions],
    };
  }
}
