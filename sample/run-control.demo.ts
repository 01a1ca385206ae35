import { Injectable, Logger } from '@nestjs/common';
import { QueueClient, RunCancelledError } from '../lib';
import { CatalogExportWorkflow, exportedPages } from './catalog-export.workflow';
import { DemoReport } from './demo.report';
import { syncStarts, TenantSyncWorkflow } from './tenant-sync.workflow';

const WAIT = { timeoutMs: 15_000 };

/** Run control: progress, cancel, retry of the cancelled run, pause and resume, listing. Returns the failed checks. */
@Injectable()
export class RunControlDemo {
  private readonly logger = new Logger('Demo');
  private readonly report = new DemoReport(this.logger);

  constructor(private readonly client: QueueClient) {}

  async runAll(): Promise<string[]> {
    const cancelled = await this.cancelAndRetry();
    await this.pauseAndResume();
    await this.groupRateLimit();
    await this.listing(cancelled);
    return this.report.problems;
  }

  /** 11. An export reports progress, is cancelled mid-way, then re-driven: it resumes after its last page. */
  private async cancelAndRetry(): Promise<string> {
    this.report.section('11. run control: progress, cancel, and retry of the cancelled run');
    const run = await this.client.enqueue(CatalogExportWorkflow, { pages: 6, pageMs: 120 });
    const seen: unknown[] = [];
    let third!: () => void;
    const reachedThird = new Promise<void>((resolve) => (third = resolve));
    const waited = run
      .result({ ...WAIT, onProgress: (p) => (seen.push(p), (p as { page: number }).page >= 3 && third()) })
      .catch((error: unknown) => error);
    await reachedThird;
    const { cancelled, state } = await this.client.cancel(run.id, { reason: 'the catalog changed; start over later' });
    this.logger.log(`cancel(${run.id}) → cancelled ${cancelled} (it was ${state}) after progress ${JSON.stringify(seen)}`);
    const error = await waited;
    this.report.check(
      error instanceof RunCancelledError && error.reason === 'the catalog changed; start over later',
      'the waiter rejected with RunCancelledError and the reason',
    );
    const info = await this.client.get(run.id);
    this.report.check(info?.state === 'cancelled', 'get() shows the run cancelled');
    const before = exportedPages.get(run.id) ?? [];

    const { previousState } = await this.client.retry(run.id);
    const result = await this.client.wait(run.id, WAIT);
    const pages = exportedPages.get(run.id) ?? [];
    this.logger.log(`retry(${run.id}) from ${previousState} → ${JSON.stringify(result)}; pages written: ${pages.join(', ')}`);
    this.report.check(
      pages.length === 6 && new Set(pages).size === 6,
      `the retry resumed after page ${before.length}: every page written once`,
    );
    this.report.check((await this.client.get(run.id))?.progress !== undefined, 'get() shows its last progress');
    return run.id;
  }

  /** 12. Pausing the workflow: runs wait (even on an idle worker), then resume starts them. */
  private async pauseAndResume(): Promise<void> {
    this.report.section('12. run control: pause and resume a workflow, fleet-wide');
    await this.client.pause({ workflow: CatalogExportWorkflow });
    const run = await this.client.enqueue(CatalogExportWorkflow, { pages: 1, pageMs: 1 });
    const stats = (await this.client.stats({ workflow: CatalogExportWorkflow })).workflows['catalog.export'];
    this.logger.log(`paused: stats → paused ${stats.paused}, waiting ${stats.waiting}, rate limit ${JSON.stringify(stats.rateLimit)}`);
    this.report.check(stats.paused && (await this.client.get(run.id))?.state === 'waiting', 'the paused workflow started nothing');
    await this.client.resume({ workflow: CatalogExportWorkflow });
    this.report.check((await run.result(WAIT)).pages === 1, 'resume started the waiting run');
  }

  /** 12b. A rate limit per group: each tenant's runs start at most 2 a second; another tenant is not held up. */
  private async groupRateLimit(): Promise<void> {
    this.report.section('12b. run control: a rate limit per group (groupRateLimit: 2 starts a second per tenant)');
    const acme = await this.client.enqueueMany(
      TenantSyncWorkflow,
      Array.from({ length: 5 }, () => ({ input: { tenant: 'acme' }, opts: { group: 'acme' } })),
    );
    const globex = await this.client.enqueue(TenantSyncWorkflow, { tenant: 'globex' }, { group: 'globex' });
    await globex.result(WAIT);
    const groups = (await this.client.stats({ workflow: TenantSyncWorkflow, groups: true })).workflows['tenant.sync'].groups ?? {};
    const held = groups.acme;
    this.logger.log(`stats → acme ${JSON.stringify(held)}`);
    this.report.check(
      held?.rateLimit?.max === 2 && held.rateHeldUntil !== undefined,
      "stats shows acme's rate limit, and until when it holds acme's runs back",
    );
    await Promise.all(acme.map((run) => run.result(WAIT)));
    const starts = syncStarts.get('acme') ?? [];
    const tooClose = starts.filter((t, i) => i + 2 < starts.length && starts[i + 2] - t < 1_000);
    this.logger.log(`acme's 5 syncs started at +${starts.map((t) => t - starts[0]).join(', +')} ms; globex's ran meanwhile`);
    this.report.check(starts.length === 5 && tooClose.length === 0, 'no three acme syncs started within one second');
  }

  /** 13. Listing: completed and cancelled runs in finish order, one Redis call a page. */
  private async listing(cancelledId: string): Promise<void> {
    this.report.section('13. run control: listRuns');
    const completed = await this.client.listRuns({ workflow: CatalogExportWorkflow, state: 'completed' });
    this.logger.log(`listRuns(completed) → ${completed.runs.map((r) => r.id).join(', ')}`);
    this.report.check(
      completed.runs.some((r) => r.id === cancelledId),
      'the re-driven run is listed as completed',
    );
  }
}
