export { SluiceDashboardModule } from './dashboard.module';
export type { SluiceDashboardOptions, SluiceDashboardAsyncOptions, DashboardGuardFn } from './dashboard.options';
export { CSRF_HEADER } from './dashboard-action.guard';
export { ASSET_BUDGET_BYTES } from './dashboard.assets';
export { basicAuthGuard, loopbackOnlyGuard, type BasicAuthOptions } from './dashboard.recipes';
