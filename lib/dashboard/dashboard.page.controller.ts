import { Controller, Get, Header, Inject, NotFoundException, Param, Req, Res, UseGuards, UseInterceptors } from '@nestjs/common';
import { DashboardAccessGuard } from './dashboard-access.guard';
import { basePathOf, loadAssets, pageHtml, type Asset } from './dashboard.assets';
import { setHeader } from './dashboard.headers';
import { DashboardInterceptor } from './dashboard.interceptor';
import { DASHBOARD_OPTIONS, type ResolvedDashboardOptions } from './dashboard.options';

/** The page and its two assets, behind the dashboard's guard like everything else. */
@Controller()
@UseGuards(DashboardAccessGuard)
@UseInterceptors(DashboardInterceptor)
export class DashboardPageController {
  private assets?: Map<string, Asset>;

  constructor(@Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions) {}

  @Get()
  @Header('Content-Type', 'text/html; charset=utf-8')
  page(@Req() request: { originalUrl?: string; url: string }): string {
    return pageHtml(basePathOf(request.originalUrl ?? request.url), { readOnly: this.options.readOnly, pollMs: this.options.pollMs });
  }

  @Get('assets/:name')
  asset(
    @Param('name') name: string,
    @Req() request: { headers: Record<string, string | undefined> },
    @Res({ passthrough: true }) response: unknown,
  ): string {
    const asset = (this.assets ??= loadAssets()).get(name);
    if (!asset) throw new NotFoundException(`No dashboard asset ${name}`);
    setHeader(response, 'Content-Type', asset.type);
    setHeader(response, 'ETag', asset.etag);
    // Revalidated on each load (a new release's assets show at once), answered 304 when unchanged.
    setHeader(response, 'Cache-Control', 'no-cache');
    if (request.headers['if-none-match'] === asset.etag) {
      (response as { status(code: number): unknown }).status(304);
      return '';
    }
    return asset.body;
  }
}
