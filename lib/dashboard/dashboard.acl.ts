import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { AclCheck } from '../redis/acl.check';
import { DASHBOARD_OPTIONS, type ResolvedDashboardOptions } from './dashboard.options';

/**
 * Tells the app's ACL boot check (AclCheck) that this process serves a read-only dashboard, so
 * that without a worker it needs only the dashboard's Redis permissions (docs/connections.md,
 * "ACL users"). Done at module init: every module's init runs before the first bootstrap hook,
 * where the check runs. A dashboard with actions needs the producer's rule, the default.
 */
@Injectable()
export class DashboardAclRole implements OnModuleInit {
  constructor(
    private readonly moduleRef: ModuleRef,
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
  ) {}

  onModuleInit(): void {
    if (!this.options.readOnly) return;
    let acl: AclCheck | undefined;
    try {
      acl = this.moduleRef.get(AclCheck, { strict: false });
    } catch {
      // No QueueModule in the app: its own pages report that; nothing to tell.
    }
    acl?.servesReadOnlyDashboard();
  }
}
