/**
 * `nest-sluice/dashboard`: a web dashboard of runs, workflows and schedules, mounted in the app
 * with {@link SluiceDashboardModule}, behind a guard such as {@link basicAuthGuard}.
 * @module nest-sluice/dashboard
 */
export { SluiceDashboardModule } from './dashboard.module';
export type { SluiceDashboardOptions, SluiceDashboardAsyncOptions, DashboardGuardFn } from './dashboard.options';
export { CSRF_HEADER } from './dashboard-action.guard';
export { ASSET_BUDGET_BYTES } from './dashboard.assets';
export { basicAuthGuard, type BasicAuthOptions } from './basic-auth.guard';
export { loopbackOnlyGuard } from './loopback-only.guard';
