import type Redis from 'ioredis';
import { type Browser, chromium, type Page } from 'playwright-core';
import { BatchContext, Workflow } from '../../lib';
import { dropNamespace, rawRedis, uniqueNamespace } from '../support/app';
import { createDashboardApp, type DashboardApp } from '../support/dashboard-app';

/** Batches on the dashboard's pages (docs/batches.md): a member links its batch, a batch its members, the runs list filters by batch. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

@Workflow('brb.label', { batch: { maxSize: 3, maxWaitMs: 100 } })
class LabelBatch {
  async run(inputs: string[], _ctx: BatchContext<string>) {
    return inputs.map((s) => `<${s}>`);
  }
}

describe('dashboard in Chromium: batches', () => {
  const ns = uniqueNamespace('brb');
  let redis: Redis;
  let dash: DashboardApp;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    redis = rawRedis();
    dash = await createDashboardApp('express', [LabelBatch], { namespace: ns }, { path: '/sluice', pollMs: 500 });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    page.on('pageerror', (error) => pageErrors.push(`pageerror: ${error.message}`));
    page.on('console', (message) => message.type() === 'error' && pageErrors.push(`console: ${message.text()}`));
  });
  afterAll(async () => {
    await browser?.close();
    await dash?.close();
    await dropNamespace(redis, ns);
    redis.disconnect();
  });
  afterEach(() => expect(pageErrors.splice(0)).toEqual([]));

  it('goes from a member to its batch, and from the batch to its members through the batch filter', async () => {
    const ids = ['b-1', 'b-2', 'b-3'];
    await Promise.all(ids.map((id) => dash.client.run(LabelBatch, id, { id, timeoutMs: 10_000 })));
    const batchId = (await dash.client.get('b-1'))!.batch!;
    const members = (await dash.client.batchMembers(batchId))!;

    await page.goto(`${dash.origin}/sluice#/runs/b-1`);
    await page.getByTestId('run-batch').filter({ hasText: batchId }).waitFor();
    await page.getByTestId('run-batch').click();
    await page
      .getByTestId('run-members')
      .filter({ hasText: `${members.length} of “brb.label”` })
      .waitFor();
    await page.getByTestId('run-members').click();
    await page.locator('[data-testid="run-row"]').first().waitFor();
    expect(await page.getByTestId('filter-batch').inputValue()).toBe(batchId);
    expect(await page.locator('[data-testid="run-row"]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-run')))).toEqual(
      members,
    );

    // The control itself: type a batch id and apply.
    await page.goto(`${dash.origin}/sluice#/runs`);
    await page.getByTestId('filter-batch').fill(batchId);
    await page.getByTestId('filter-apply').click();
    await page.waitForURL(/batch=/);
    await page.locator(`[data-testid="run-row"][data-run="${members[0]}"]`).waitFor();
    expect(await page.getByTestId('run-row').count()).toBe(members.length);
  });
});
