import { Injectable, Logger } from '@nestjs/common';
import { QueueClient } from '../lib';
import { DemoReport } from './demo.report';

/** Where AppModule mounts the dashboard. */
export const DASHBOARD_PATH = '/sluice';

/**
 * The dashboard (SluiceDashboardModule, mounted by AppModule): its page and API answer on the
 * app's HTTP server; a request from elsewhere than this machine is refused by the sample's guard.
 * With SAMPLE_KEEP_OPEN=1 the sample stays up afterwards so you can open it in a browser.
 */
@Injectable()
export class DashboardDemo {
  private readonly logger = new Logger('Demo');
  private readonly report = new DemoReport(this.logger);

  constructor(private readonly client: QueueClient) {}

  async runAll(origin: string): Promise<string[]> {
    this.report.section(`17. dashboard: ${origin}${DASHBOARD_PATH}`);
    const page = await fetch(`${origin}${DASHBOARD_PATH}`);
    const csp = page.headers.get('content-security-policy') ?? '';
    this.report.check(
      page.status === 200 && csp.includes("script-src 'self'"),
      'the dashboard page is served, with a strict Content-Security-Policy',
    );
    const overview = (await (await fetch(`${origin}${DASHBOARD_PATH}/api/overview`)).json()) as {
      workflows: Array<{ name: string; completed: number }>;
    };
    const stats = await this.client.stats();
    const order = overview.workflows.find((workflow) => workflow.name === 'order.fulfil');
    this.report.check(
      overview.workflows.length === Object.keys(stats.workflows).length && order !== undefined && order.completed > 0,
      `its overview lists the ${overview.workflows.length} workflows, with the orders fulfilled so far`,
    );
    const action = await fetch(`${origin}${DASHBOARD_PATH}/api/workflows/order.fulfil/pause`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    this.report.check(action.status === 403, "an action without the page's CSRF header is refused (403)");
    return this.report.problems;
  }
}
