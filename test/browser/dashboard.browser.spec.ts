import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type Redis from 'ioredis';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { RunContext, Workflow } from '../../lib';
import { dropNamespace, rawRedis, uniqueNamespace } from '../support/app';
import { createDashboardApp, type DashboardApp } from '../support/dashboard-app';
import { commandCounts } from '../support/redis-commands';

/**
 * The dashboard in a real Chromium: an operator finds a failed run, sees which step failed on the
 * timeline, retries it and watches it complete; cancels a sleeping run; changes a cap; a payload
 * with markup shows as text and runs nothing; a refused guard shows nothing. Screenshots of every
 * page go to test-results/dashboard/. Also measures what an open overview page costs Redis.
 */
const SHOTS = join(__dirname, '..', '..', 'test-results', 'dashboard');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">';

/** Fails at its `charge` step until the test "fixes" the card: a run to find, inspect and retry. */
let cardFixed = false;
@Workflow('shop.checkout', { attempts: 1 })
class Checkout {
  async run(input: { order: string; note?: string }, ctx: RunContext) {
    await ctx.step('reserve-stock', async () => 'reserved');
    await ctx.step('charge', async () => {
      if (!cardFixed) throw new Error(`card declined for order ${input.order}`);
      return 'charged';
    });
    await ctx.step('ship', async () => 'shipped');
    return { order: input.order, status: 'shipped' };
  }
}

@Workflow('shop.cool-off', { attempts: 1 })
class CoolOff {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.step('notify', async () => 'sent');
    await ctx.sleep('cool-off', '1h');
    await ctx.step('close', async () => 'closed');
  }
}

/** Started by the event `shop.paid` (QueueClient.publish): the runs page filters by it. */
@Workflow('shop.receipt', { attempts: 1, on: 'shop.paid' })
class Receipt {
  async run(input: { order: string }) {
    return `receipt ${input.order}`;
  }
}

describe('dashboard in Chromium', () => {
  const ns = uniqueNamespace('br');
  let redis: Redis;
  let dash: DashboardApp;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    redis = rawRedis();
    dash = await createDashboardApp(
      'express',
      [Checkout, CoolOff],
      { namespace: ns, worker: { concurrency: 4 } },
      {
        path: '/sluice',
        readOnly: false,
        pollMs: 500,
        sampleMs: 1000,
        guard: (request: { headers: Record<string, string | undefined> }) => request.headers['x-operator'] === 'ops',
      },
    );
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 }, extraHTTPHeaders: { 'x-operator': 'ops' } });
    page = await context.newPage();
    // Script errors and CSP violations (Chromium reports those on the console) fail the suite.
    page.on('pageerror', (error) => pageErrors.push(`pageerror: ${error.message}`));
    page.on('console', (message) => message.type() === 'error' && pageErrors.push(`console: ${message.text()}`));
  });

  afterAll(async () => {
    await browser?.close();
    await dash?.close();
    await dropNamespace(redis, ns);
    redis.disconnect();
  });

  afterEach(() => {
    const errors = pageErrors.splice(0);
    expect(errors).toEqual([]);
  });

  const shot = (name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  const confirm = async () => {
    await page.getByTestId('confirm-dialog').waitFor({ state: 'visible' });
    await page.getByTestId('confirm-ok').click();
  };
  const flash = () => page.getByTestId('flash');

  it('finds a failed run, sees the failed step on its timeline, retries it and watches it complete', async () => {
    const failed = await dash.client.enqueue(Checkout, { order: 'A-1001' });
    await expect(failed.result({ timeoutMs: 10_000 })).rejects.toThrow('card declined');
    await dash.client
      .enqueue(Checkout, { order: 'A-1002' }, { group: 'tenant-eu' })
      .then((run) => run.result({ timeoutMs: 10_000 }).catch(() => undefined));

    await page.goto(`${dash.origin}/sluice`);
    const row = page.locator('[data-testid="wf-row"][data-workflow="shop.checkout"]');
    await row.waitFor();
    await shot('overview');

    await row.getByTestId('failed-link').click();
    await page.getByTestId('run-row').first().waitFor();
    // The filter bar: failed runs of shop.checkout, applied explicitly.
    await page.getByTestId('filter-workflow').selectOption('shop.checkout');
    await page.getByTestId('filter-state').selectOption('failed');
    // Applying navigates (a hashchange, handled after the click returns): the list shown before it
    // must be gone before the new one is read, or its rows are counted while the new page loads.
    const shownBefore = await page.getByTestId('runs-table').elementHandle();
    await page.getByTestId('filter-apply').click();
    await page.waitForFunction((table) => !table?.isConnected, shownBefore);
    await page.locator(`[data-testid="run-row"][data-run="${failed.id}"]`).waitFor();
    expect(await page.getByTestId('run-row').count()).toBe(2);
    await shot('runs');

    await page.locator(`[data-testid="run-row"][data-run="${failed.id}"]`).getByTestId('run-link').click();
    await page.getByTestId('timeline').waitFor();
    expect(await page.getByTestId('run-state').innerText()).toContain('failed');
    const failedBar = page.locator('[data-testid="timeline"] .call-failed');
    expect(await failedBar.count()).toBe(1);
    expect(await failedBar.getAttribute('data-key')).toBe('charge#1');
    expect(await page.locator('[data-testid="timeline"] .call-ok').getAttribute('data-key')).toBe('reserve-stock#1');
    expect(await page.getByTestId('run-error').innerText()).toContain('card declined for order A-1001');
    await shot('run-failed');

    cardFixed = true;
    await page.getByTestId('action-retry').click();
    await confirm();
    await flash()
      .filter({ hasText: `Run ${failed.id} is waiting again` })
      .waitFor();
    await page.getByTestId('run-state').filter({ hasText: 'completed' }).waitFor();
    // Attempt 2 replayed the step that had landed and ran the one that failed, then the rest.
    await page.locator('[data-testid="timeline"] .call-replayed[data-key="reserve-stock#1"][data-attempt="2"]').waitFor();
    await page.locator('[data-testid="timeline"] .call-ok[data-key="charge#1"][data-attempt="2"]').waitFor();
    expect(await page.getByTestId('run-result').innerText()).toContain('shipped');
    expect((await dash.client.get(failed.id))!.state).toBe('completed');
    await shot('run-retried');
  });

  it('cancels a sleeping run', async () => {
    const sleeper = await dash.client.enqueue(CoolOff, {});
    await waitForState(dash, sleeper.id, 'sleeping');
    await page.goto(`${dash.origin}/sluice#/runs/${encodeURIComponent(sleeper.id)}`);
    await page.getByTestId('run-state').filter({ hasText: 'sleeping' }).waitFor();
    await page.locator('[data-testid="timeline"] .call-waiting[data-key="cool-off#1"]').waitFor();
    await shot('run-sleeping');
    await page.getByTestId('action-cancel').click();
    await confirm();
    await flash()
      .filter({ hasText: `Cancelled run ${sleeper.id}` })
      .waitFor();
    await page.getByTestId('run-state').filter({ hasText: 'cancelled' }).waitFor();
    expect((await dash.client.get(sleeper.id))!.state).toBe('cancelled');
  });

  it('opens runs whose ids are dots or hold a slash from the runs list, and removes one', async () => {
    cardFixed = false; // failed runs: the ones the runs list shows
    // URLs drop dot segments ('/api/runs/..' is '/api/'), even percent-encoded: the page must still reach these runs.
    const ids = ['..', '.', 'a/b#c'];
    for (const id of ids)
      await expect((await dash.client.enqueue(Checkout, { order: `id ${id}` }, { id })).result({ timeoutMs: 10_000 })).rejects.toThrow(
        'card declined',
      );
    for (const id of ids) {
      await page.goto(`${dash.origin}/sluice#/runs?workflow=shop.checkout&state=failed`);
      await page.locator(`[data-testid="run-row"][data-run="${id}"]`).getByTestId('run-link').click();
      await page.getByTestId('run-state').filter({ hasText: 'failed' }).waitFor();
      expect(await page.getByTestId('run-error').innerText()).toContain(`card declined for order id ${id}`);
    }
    await page.goto(`${dash.origin}/sluice#/runs/..`);
    await page.getByTestId('run-error').filter({ hasText: 'order id ..' }).waitFor();
    await page.getByTestId('action-remove').click();
    await confirm();
    await flash().filter({ hasText: 'Removed run ..' }).waitFor();
    expect(await dash.client.get('..')).toBeNull();
  });

  it('shows a run’s dedupe, and filters the runs list by dedupe key with its control', async () => {
    const dedupe = { key: 'cart-42', ttlMs: 60_000, mode: 'debounce' as const };
    const first = await dash.client.enqueue(Checkout, { order: 'D-1' }, { dedupe });
    await dash.client.enqueue(Checkout, { order: 'D-2' }, { dedupe });
    const other = await dash.client.enqueue(Checkout, { order: 'D-3' }, { dedupe: { ...dedupe, key: 'cart-7' } });
    try {
      await page.goto(`${dash.origin}/sluice#/runs?workflow=shop.checkout&state=delayed`);
      await page.locator(`[data-testid="run-row"][data-run="${other.id}"]`).waitFor();
      await page.getByTestId('filter-dedupe').fill('cart-42');
      await page.getByTestId('filter-apply').click();
      await page.waitForURL(/dedupe=cart-42/);
      await page.locator(`[data-testid="run-row"][data-run="${other.id}"]`).waitFor({ state: 'detached' });
      await page.locator(`[data-testid="run-row"][data-run="${first.id}"]`).waitFor();
      expect(await page.getByTestId('run-row').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-run')))).toEqual([first.id]);
      expect(await page.getByTestId('run-row-dedupe').textContent()).toBe('cart-42 · debounce · 2 enqueues');
      await shot('runs-dedupe');
      await page.getByTestId('run-link').click();
      await page.getByTestId('run-dedupe').waitFor();
      expect(await page.getByTestId('run-dedupe').textContent()).toBe('cart-42 · debounce · 2 enqueues holds the input of enqueue #2 of 2');
      // The key links to the runs with that key.
      await page.getByTestId('dedupe-link').click();
      await page.waitForURL(/#\/runs\?workflow=shop\.checkout&dedupe=cart-42/);
    } finally {
      await dash.client.cancel(first.id);
      await dash.client.cancel(other.id);
    }
  });

  it('filters the runs by event name, then by event id, and shows the event on the run', async () => {
    // A namespace of its own: the overview's cost below is measured on this one's two workflows.
    const eventsNs = uniqueNamespace('bre');
    const events = await createDashboardApp(
      'express',
      [Receipt],
      { namespace: eventsNs },
      { path: '/sluice', guard: (request: { headers: Record<string, string | undefined> }) => request.headers['x-operator'] === 'ops' },
    );
    try {
      const paid = await events.client.publish('shop.paid', { order: 'E-1' }, { id: 'paid-E-1' });
      const other = await events.client.publish('shop.paid', { order: 'E-2' }, { id: 'paid-E-2' });
      await Promise.all([...paid.runs, ...other.runs].map((run) => run.result({ timeoutMs: 10_000 })));
      await page.goto(`${events.origin}/sluice#/runs`);
      await page.getByTestId('filter-event').fill('shop.paid');
      await page.getByTestId('filter-apply').click();
      const rows = page.getByTestId('run-row');
      await rows.filter({ hasText: 'paid-E-2' }).waitFor();
      expect(await rows.count()).toBe(2);
      expect(page.url()).toContain('event=shop.paid');
      await rows.filter({ hasText: 'paid-E-1' }).getByTestId('event-id-link').click();
      await page.waitForURL(/eventId=paid-E-1/);
      await rows.filter({ hasText: 'paid-E-2' }).waitFor({ state: 'detached' });
      expect(await rows.count()).toBe(1);
      await rows.getByTestId('run-link').click();
      await page.getByTestId('run-state').filter({ hasText: 'completed' }).waitFor();
      expect(await page.getByTestId('run-event').innerText()).toBe('shop.paid paid-E-1');
      await shot('runs-by-event');
    } finally {
      await page.goto('about:blank');
      await events.close();
      await dropNamespace(redis, eventsNs);
    }
  });

  it('changes a cap after confirmation', async () => {
    await page.goto(`${dash.origin}/sluice#/`);
    const row = page.locator('[data-testid="wf-row"][data-workflow="shop.checkout"]');
    await row.getByTestId('set-cap').click();
    await page.getByTestId('confirm-input').fill('3');
    await confirm();
    await flash().filter({ hasText: 'Cap of shop.checkout set to 3' }).waitFor();
    expect((await dash.client.getLimits({ workflow: 'shop.checkout' })).workflow).toBe(3);
    await row.getByTestId('wf-cap').filter({ hasText: '3' }).waitFor();
    // Cancelling the dialog changes nothing.
    await row.getByTestId('set-cap').click();
    await page.getByTestId('confirm-input').fill('9');
    await page.getByTestId('confirm-cancel').click();
    expect((await dash.client.getLimits({ workflow: 'shop.checkout' })).workflow).toBe(3);
  });

  it('shows a payload with markup as text and runs none of it', async () => {
    cardFixed = false; // it fails, so its error (which quotes the order) shows too
    const hostile = await dash.client.enqueue(Checkout, { order: HOSTILE, note: HOSTILE });
    await expect(hostile.result({ timeoutMs: 10_000 })).rejects.toThrow('card declined');
    await page.goto(`${dash.origin}/sluice#/runs/${encodeURIComponent(hostile.id)}`);
    await page.getByTestId('run-input').filter({ hasText: '<script>window.__pwned = 1</script>' }).waitFor();
    expect(await page.getByTestId('run-error').innerText()).toContain('<img src=x onerror=');
    await page.goto(`${dash.origin}/sluice#/runs?workflow=shop.checkout&state=failed`);
    await page.getByTestId('run-row').first().waitFor();
    expect(await page.evaluate('typeof window.__pwned')).toBe('undefined');
    expect(await page.evaluate('document.querySelectorAll("script").length')).toBe(1);
    expect(await page.evaluate('document.querySelectorAll("img").length')).toBe(0);
    await shot('runs-hostile-payload');
  });

  it('shows groups and schedules', async () => {
    await dash.client.schedule('nightly-report', Checkout, { cron: '0 3 * * *', tz: 'Europe/Paris', input: { order: 'report' } });
    await dash.client.schedule('stock-sweep', Checkout, { every: '15m', offsetMs: 300_000, input: { order: 'sweep' } });
    await page.goto(`${dash.origin}/sluice#/schedules`);
    await page.locator('[data-testid="schedule-row"][data-schedule="nightly-report"]').waitFor();
    const when = (id: string) =>
      page.locator(`[data-testid="schedule-row"][data-schedule="${id}"] [data-testid="schedule-when"]`).innerText();
    expect(await when('nightly-report')).toBe('0 3 * * *');
    expect(await when('stock-sweep')).toBe('every 15m');
    await shot('schedules');
    // Interval schedules only, from the page's filter.
    await page.getByTestId('schedule-filter-kind').selectOption('every');
    await page.getByTestId('schedule-filter-apply').click();
    await page.waitForURL(/#\/schedules\?kind=every$/);
    await page.locator('[data-testid="schedule-row"][data-schedule="nightly-report"]').waitFor({ state: 'detached' });
    expect(await page.getByTestId('schedule-row').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-schedule')))).toEqual([
      'stock-sweep',
    ]);
    // Groups with work: held back by a pause, so they stay listed.
    await dash.client.pause({ workflow: CoolOff });
    for (const [group, runs] of [
      ['tenant-eu', 5],
      ['tenant-us', 3],
      ['tenant-apac', 1],
    ] as const) {
      await dash.client.enqueueMany(
        CoolOff,
        Array.from({ length: runs }, () => ({ input: {}, opts: { group } })),
      );
    }
    await page.goto(`${dash.origin}/sluice#/workflows/shop.cool-off/groups`);
    await page.getByTestId('groups-table').waitFor();
    const groups = await page.getByTestId('group-row').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-group')));
    expect(groups).toEqual(['tenant-eu', 'tenant-us', 'tenant-apac']);
    await page.locator('[data-testid="group-row"][data-group="tenant-eu"]').getByText('paused (workflow)').waitFor();
    await shot('groups');
    // Filtered by a part of the name, from the form: the page's route carries the filter.
    await page.getByTestId('group-filter-name').fill('us');
    await page.getByTestId('group-filter-apply').click();
    await page.waitForURL(/groups\?q=us$/);
    await page.locator('[data-testid="group-row"][data-group="tenant-eu"]').waitFor({ state: 'detached' });
    expect(await page.getByTestId('group-row').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-group')))).toEqual([
      'tenant-us',
    ]);
    await page.goto(`${dash.origin}/sluice#/`);
    await page.locator('[data-testid="wf-row"][data-workflow="shop.cool-off"]').waitFor();
    await shot('overview-paused');
  });

  it('refuses a page whose Host is not this machine (DNS rebinding) when it has no guard', async () => {
    const open = await createDashboardApp('express', [], { namespace: ns, worker: { enabled: false } }, { path: '/open', readOnly: false });
    try {
      const port = new URL(open.origin).port;
      // Chromium resolves this name to 127.0.0.1 (a rebound DNS name) but sends it as the Host.
      const resolver = await chromium.launch({
        executablePath: CHROMIUM,
        args: ['--no-sandbox', '--host-resolver-rules=MAP rebound.example 127.0.0.1'],
      });
      try {
        const attacker = await resolver.newPage();
        const response = await attacker.goto(`http://rebound.example:${port}/open`);
        expect(response!.status()).toBe(403);
        expect(await attacker.locator('#app').count()).toBe(0);
        // The attack: the rebound page's script calls the dashboard as its own origin, CSRF header and all.
        const statuses = await attacker.evaluate(async () => [
          (await fetch('/open/api/overview')).status,
          (
            await fetch('/open/api/workflows/shop.checkout/pause', {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-sluice-csrf': '1' },
              body: '{}',
            })
          ).status,
        ]);
        expect(statuses).toEqual([403, 403]);
        expect((await open.client.stats({ workflow: 'shop.checkout' })).workflows['shop.checkout'].paused).toBe(false);
        const local = await resolver.newPage();
        expect((await local.goto(`http://localhost:${port}/open`))!.status()).toBe(200);
        await local.locator('[data-testid="wf-row"][data-workflow="shop.checkout"]').waitFor();
      } finally {
        await resolver.close();
      }
    } finally {
      await open.close();
    }
  });

  it('shows nothing when the guard refuses: the page and the API answer 403', async () => {
    const stranger = await browser.newContext();
    const strangerPage = await stranger.newPage();
    const response = await strangerPage.goto(`${dash.origin}/sluice`);
    expect(response!.status()).toBe(403);
    expect(await strangerPage.locator('#app').count()).toBe(0);
    const api = await strangerPage.request.get(`${dash.origin}/sluice/api/overview`);
    expect(api.status()).toBe(403);
    const action = await strangerPage.request.post(`${dash.origin}/sluice/api/workflows/shop.checkout/pause`, {
      headers: { 'content-type': 'application/json', 'x-sluice-csrf': '1' },
      data: {},
    });
    expect(action.status()).toBe(403);
    await stranger.close();
  });

  it('costs Redis one stats script call per refresh of an open overview page', async () => {
    const measure = async (ms: number) => {
      const before = await commandCounts(redis);
      await new Promise((resolve) => setTimeout(resolve, ms));
      const after = await commandCounts(redis);
      return { commands: (after.commands - before.commands) / (ms / 1000), scripts: (after.scripts - before.scripts) / (ms / 1000) };
    };
    await page.goto('about:blank');
    const idle = await measure(5000);
    await page.goto(`${dash.origin}/sluice`);
    await page.locator('[data-testid="wf-row"]').first().waitFor();
    const open = await measure(5000);
    const perPage = { commands: open.commands - idle.commands, scripts: open.scripts - idle.scripts };
    console.log(
      `open overview page, polling every 500 ms, 2 workflows: +${perPage.scripts.toFixed(2)} script calls/s, +${perPage.commands.toFixed(1)} Redis commands/s (idle fleet: ${idle.scripts.toFixed(2)} / ${idle.commands.toFixed(1)})`,
    );
    // Two refreshes a second, each one stats call. The idle window has the background sampler in it
    // (it samples for 15 minutes after the last view, and the earlier tests viewed pages); it stands
    // down while a page polls, so the page's calls replace the sampler's: the open window itself shows
    // the two calls a second, and the difference stays under one call per refresh.
    expect(open.scripts).toBeGreaterThan(1.5);
    expect(perPage.scripts).toBeLessThan(3);
    expect(open.commands / open.scripts).toBeLessThan(40);
  });

  it('draws the throughput of the last minutes', async () => {
    cardFixed = true;
    await page.goto(`${dash.origin}/sluice#/`);
    for (let batch = 0; batch < 6; batch++) {
      const runs = await dash.client.enqueueMany(
        Checkout,
        Array.from({ length: 100 }, (_, i) => ({ input: { order: `T-${batch}-${i}` } })),
      );
      await Promise.all(runs.map((run) => run.result({ timeoutMs: 10_000 })));
      await page.waitForTimeout(600); // let the page take a sample between batches: the chart's subject is time
    }
    const chart = page.getByTestId('throughput-chart');
    await chart.waitFor();
    expect(await chart.locator('path, polyline').count()).toBeGreaterThan(0);
    await shot('overview-throughput');
  });
});

async function waitForState(dash: DashboardApp, id: string, state: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await dash.client.get(id))?.state === state) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`run ${id} never reached ${state}`);
}
