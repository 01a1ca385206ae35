import { type CanActivate, type ExecutionContext, Inject, Injectable, type Type } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { DASHBOARD_OPTIONS, type DashboardGuardFn, type ResolvedDashboardOptions } from './dashboard.options';

/**
 * Every dashboard route (page, assets, API) goes through the guard given to `forRoot`: a guard
 * class is taken from the app's providers when it is one (so it shares their state), else created
 * once with its dependencies injected; a function is called with the request. What a refusing guard
 * throws (an `UnauthorizedException`, say) is the answer; `false` is a 403.
 */
@Injectable()
export class DashboardAccessGuard implements CanActivate {
  private instance?: Promise<CanActivate>;

  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly moduleRef: ModuleRef,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const { guard } = this.options;
    if (!guard) return true;
    if (!isGuardClass(guard)) return (await (guard as DashboardGuardFn)(context.switchToHttp().getRequest(), context)) === true;
    this.instance ??= this.resolve(guard);
    const allowed = await (await this.instance).canActivate(context);
    // A guard may answer with an Observable, as Nest allows.
    if (typeof allowed === 'object' && allowed !== null && 'subscribe' in allowed) {
      return new Promise<boolean>((resolve, reject) => {
        let last = false;
        allowed.subscribe({ next: (value) => (last = value), error: reject, complete: () => resolve(last === true) });
      });
    }
    return allowed === true;
  }

  private async resolve(guard: Type<CanActivate>): Promise<CanActivate> {
    try {
      return this.moduleRef.get(guard, { strict: false });
    } catch {
      return this.moduleRef.create(guard);
    }
  }
}

/** A class has a prototype with canActivate; an arrow function has no prototype at all. */
function isGuardClass(guard: unknown): guard is Type<CanActivate> {
  return typeof guard === 'function' && typeof (guard as { prototype?: { canActivate?: unknown } }).prototype?.canActivate === 'function';
}
