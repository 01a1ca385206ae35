import { type CanActivate, type ExecutionContext, ForbiddenException, Inject, Injectable } from '@nestjs/common';
import { DASHBOARD_OPTIONS, type ResolvedDashboardOptions } from './dashboard.options';

/** The header every action request carries (set by the dashboard's script). */
export const CSRF_HEADER = 'x-sluice-csrf';

type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Why a request comes from another site, or undefined if nothing says so. A browser's
 * `Sec-Fetch-Site` is trusted when present (`same-origin` passes even behind a proxy that rewrites
 * `Host`); without it, an `Origin` must name this host. Requests without either (curl, old
 * browsers) pass: the guard and, for actions, the CSRF header are what hold them.
 */
export function crossSiteReason(headers: Headers): string | undefined {
  const site = header(headers, 'sec-fetch-site');
  if (site !== undefined) return site === 'same-origin' || site === 'none' ? undefined : 'a cross-site request';
  const origin = header(headers, 'origin');
  if (origin === undefined) return undefined;
  if (origin === 'null') return 'a request from an opaque origin';
  return hostOf(origin) === header(headers, 'host') ? undefined : 'a request from another origin';
}

/** The JSON API answers only the dashboard's own page: even an app with permissive CORS does not hand run data to other sites. */
@Injectable()
export class DashboardSameSiteGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const reason = crossSiteReason(context.switchToHttp().getRequest<{ headers: Headers }>().headers);
    if (reason) throw new ForbiddenException(`Refused: ${reason}`);
    return true;
  }
}

/**
 * Actions are refused unless enabled (`readOnly: false`), and only taken from the dashboard's own
 * script: a JSON body with the `x-sluice-csrf` header. A page of another site cannot send either
 * without a CORS preflight, which the dashboard never grants; a browser saying the request comes
 * from elsewhere is refused too (see {@link crossSiteReason}). Stateless, so it holds across
 * processes behind a load balancer.
 */
@Injectable()
export class DashboardActionGuard implements CanActivate {
  constructor(@Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions) {}

  canActivate(context: ExecutionContext): boolean {
    if (this.options.readOnly)
      throw new ForbiddenException('Dashboard actions are disabled: SluiceDashboardModule.forRoot({ readOnly: false }) enables them');
    const { headers } = context.switchToHttp().getRequest<{ headers: Headers }>();
    if (header(headers, CSRF_HEADER) !== '1')
      throw new ForbiddenException(`Refused: an action needs the ${CSRF_HEADER} header (sent by the dashboard's own page)`);
    if (!(header(headers, 'content-type') ?? '').toLowerCase().startsWith('application/json'))
      throw new ForbiddenException('Refused: an action needs a JSON body');
    const reason = crossSiteReason(headers);
    if (reason) throw new ForbiddenException(`Refused: ${reason}`);
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
