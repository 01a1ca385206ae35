import { type CanActivate, type ExecutionContext, ForbiddenException, Inject, Injectable } from '@nestjs/common';
import { DASHBOARD_OPTIONS, type ResolvedDashboardOptions } from './dashboard.options';

/** The header every action request carries (set by the dashboard's script). */
export const CSRF_HEADER = 'x-sluice-csrf';

/**
 * Actions are refused unless enabled (`readOnly: false`), and only taken from the dashboard's own
 * script: a JSON body with the `x-sluice-csrf` header. A page of another site cannot send either
 * without a CORS preflight, which the dashboard never grants; a browser's `Origin` or
 * `Sec-Fetch-Site` saying the request comes from elsewhere is refused too. Stateless, so it holds
 * across processes behind a load balancer.
 */
@Injectable()
export class DashboardActionGuard implements CanActivate {
  constructor(@Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions) {}

  canActivate(context: ExecutionContext): boolean {
    if (this.options.readOnly) throw new ForbiddenException('Dashboard actions are disabled: SluiceDashboardModule.forRoot({ readOnly: false }) enables them');
    const headers = (context.switchToHttp().getRequest() as { headers: Record<string, string | string[] | undefined> }).headers;
    const header = (name: string) => {
      const value = headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    if (header(CSRF_HEADER) !== '1') throw new ForbiddenException(`Refused: an action needs the ${CSRF_HEADER} header (sent by the dashboard's own page)`);
    if (!(header('content-type') ?? '').toLowerCase().startsWith('application/json')) throw new ForbiddenException('Refused: an action needs a JSON body');
    const site = header('sec-fetch-site');
    if (site !== undefined && site !== 'same-origin' && site !== 'none') throw new ForbiddenException('Refused: a cross-site request');
    const origin = header('origin');
    if (origin !== undefined && origin !== 'null' && hostOf(origin) !== header('host')) throw new ForbiddenException('Refused: a request from another origin');
    if (origin === 'null') throw new ForbiddenException('Refused: a request from an opaque origin');
    return true;
  }
}

function hostOf(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}
