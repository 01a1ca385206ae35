import {
  type CanActivate,
  type ExecutionContext,
  ForbiddenException,
  Inject,
  Injectable,
  Logger,
  type OnModuleInit,
  type Type,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { isObservable, lastValueFrom } from 'rxjs';
import { QueueConfigError } from '../errors';
import { hostRefusal } from './dashboard.hosts';
import { DASHBOARD_OPTIONS, type DashboardGuardFn, type ResolvedDashboardOptions } from './dashboard.options';

/**
 * Every dashboard route (page, assets, API) goes through the guard given to `forRoot`: a guard
 * class is taken from the app's providers when it is one (so it shares their state), else created
 * once with its dependencies injected, at bootstrap (a guard that cannot be made fails the boot,
 * not every request); a function is called with the request. What a refusing guard throws (an
 * `UnauthorizedException`, say) is the answer; `false` is a 403. Before it, without a guard or
 * with `allowedHosts`, the request's `Host` is checked (see dashboard.hosts.ts): a 403 for a host
 * the dashboard does not answer to, before any Redis call.
 */
/** The dashboards (by their options) whose missing guard was warned about. */
const WARNED = new WeakSet<object>();

@Injectable()
export class DashboardAccessGuard implements CanActivate, OnModuleInit {
  private readonly logger = new Logger('SluiceDashboard');
  private instance?: CanActivate;

  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly moduleRef: ModuleRef,
  ) {}

  async onModuleInit(): Promise<void> {
    const { guard, path } = this.options;
    if (!guard) {
      // Nest makes one instance per use of the class (the provider, and the controllers' guard): warn once per dashboard.
      if (WARNED.has(this.options)) return;
      WARNED.add(this.options);
      this.logger.warn(
        `The dashboard at ${path} has no guard: anyone who reaches it (as localhost${this.options.hosts?.length ? ' or one of allowedHosts' : ''}) sees every run's input, result and error${this.options.readOnly ? '' : ', and can act on them'}. Pass SluiceDashboardModule.forRoot({ guard }).`,
      );
      return;
    }
    if (isGuardClass(guard)) this.instance = await this.resolve(guard);
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const { guard, hosts } = this.options;
    if (hosts) {
      const refusal = hostRefusal(
        context.switchToHttp().getRequest<{ headers: Record<string, string | string[] | undefined> }>().headers,
        hosts,
      );
      if (refusal) throw new ForbiddenException(refusal);
    }
    if (!guard) return true;
    const allowed = this.instance
      ? await this.instance.canActivate(context)
      : await (guard as DashboardGuardFn)(context.switchToHttp().getRequest(), context);
    // A guard may answer with an Observable, as Nest allows.
    return (isObservable(allowed) ? await lastValueFrom(allowed) : allowed) === true;
  }

  private async resolve(guard: Type<CanActivate>): Promise<CanActivate> {
    try {
      return this.moduleRef.get(guard, { strict: false });
    } catch {
      try {
        return await this.moduleRef.create(guard);
      } catch (error) {
        throw new QueueConfigError(
          `SluiceDashboardModule: cannot make the guard ${guard.name}: ${(error instanceof Error ? error.message : String(error)).split('\n')[0]} Register it as a provider of your app, or pass the modules its dependencies come from as forRootAsync({ imports }).`,
        );
      }
    }
  }
}

/** A class has a prototype with canActivate; an arrow function has no prototype at all. */
function isGuardClass(guard: unknown): guard is Type<CanActivate> {
  return typeof guard === 'function' && typeof (guard as { prototype?: { canActivate?: unknown } }).prototype?.canActivate === 'function';
}
