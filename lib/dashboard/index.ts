export { SluiceDashboardModule } from './dashboard.module';
export type { SluiceDashboardOptions, SluiceDashboardAsyncOptions, DashboardGuardFn } from './dashboard.options';
export { CSRF_HEADER } from './dashboard-action.guard';
export { ASSET_BUDGET_BYTES } from './dashboard.assets';
export { basicAuthGuard, type BasicAuthOptions } from './basic-auth.guard';
export { loopbackOnlyGuard } from './loopback-only.guard';
