import { networkInterfaces } from 'node:os';
import { CanActivate, Controller, ExecutionContext, Get, Injectable, Res, UnauthorizedException } from '@nestjs/common';
import type Redis from 'ioredis';
import { type Browser, chromium, type Page } from 'playwright-core';
import { RunContext, Workflow } from '../../lib';
import { basicAuthGuard, loopbackOnlyGuard } from '../../lib/dashboard';
import { dropNamespace, rawRedis, uniqueNamespace } from '../support/app';
import { createDashboardApp, type DashboardApp } from '../support/dashboard-app';

/** What a function run in the page reads (the tests compile without the DOM library). */
interface BrowserGlobals {
  document: { querySelectorAll(selector: string): { length: number } };
}

/**
 * What a new user meets in the first hour, in a real Chromium: the runs of every state newest
 * first, found by id and paged; completed runs listed with the defaults; the error of an attempt
 * that was retried into success; a page opened with credentials in its URL; and each guard recipe
 * of docs/dashboard.md (HTTP Basic, an app's own session guard, loopback only).
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

@Workflow('first.quick', { attempts: 1 })
class Quick {
  async run(input: { n: number }, ctx: RunContext) {
    await ctx.step('work', async () => input.n);
    if (input.n < 0) throw new Error(`negative order ${input.n}`);
    return { n: input.n };
  }
}

/** Fails its first attempt at `charge`, then completes. */
@Workflow('first.flaky', { attempts: 2, backoff: { delayMs: 1 } })
class Flaky {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.step('reserve', async () => 'ok');
    await ctx.step('charge', async () => {
      if (ctx.attempt === 1) throw new Error('gateway timeout on the first attempt');
      return 'charged';
    });
    return 'done';
  }
}

/** An app's own sign-in: a cookie its login route sets, checked by its own guard class. */
@Injectable()
class Sessions {
  readonly tokens = new Set<string>();
}

@Injectable()
class SessionGuard implements CanActivate {
  constructor(private readonly sessions: Sessions) {}
  canActivate(context: ExecutionContext): boolean {
    const cookie = String(context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers.cookie ?? '');
    const token = /(?:^|;\s*)session=([^;]+)/.exec(cookie)?.[1];
    if (token && this.sessions.tokens.has(token)) return true;
    throw new UnauthorizedException('Sign in first');
  }
}

@Controller('login')
class LoginController {
  constructor(private readonly sessions: Sessions) {}
  @Get()
  login(@Res({ passthrough: true }) response: { cookie(name: string, value: string, options: object): void }): string {
    const token = `t${this.sessions.tokens.size + 1}`;
    this.sessions.tokens.add(token);
    response.cookie('session', token, { httpOnly: true, sameSite: 'strict', path: '/' });
    return 'signed in';
  }
}

describe('dashboard in Chromium: the first hour', () => {
  const ns = uniqueNamespace('fh');
  let redis: Redis;
  let browser: Browser;
  const apps: DashboardApp[] = [];
  const pageErrors: string[] = [];

  /** A page in a fresh context; `refusals`: the test opens refused pages on purpose (Chromium logs each as an error). */
  const open = async (options: Parameters<typeof browser.newContext>[0] = {}, refusals = false): Promise<Page> => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, ...options });
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(`pageerror: ${error.message}`));
    page.on(
      'console',
      (message) =>
        message.type() === 'error' &&
        !(refusals && /^Failed to load resource/.test(message.text())) &&
        pageErrors.push(`console: ${message.text()}`),
    );
    return page;
  };
  const start = async (...args: Parameters<typeof createDashboardApp>) => {
    const app = await createDashboardApp(...args);
    apps.push(app);
    return app;
  };

  beforeAll(async () => {
    redis = rawRedis();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });

  afterAll(async () => {
    await browser?.close();
    for (const app of apps) await app.close();
    await dropNamespace(redis, ns);
    redis.disconnect();
  });

  afterEach(() => {
    expect(pageErrors.splice(0)).toEqual([]);
  });

  it('lists the runs of every state newest first, pages them, finds one by id, and lists completed runs with the defaults', async () => {
    const dash = await start('express', [Quick], { namespace: ns, worker: { concurrency: 8 } }, { path: '/sluice', allowedHosts: [] });
    const page = await open();
    // The overview is open, as a user's would be: from now on completed runs are recorded for it.
    await page.goto(`${dash.origin}/sluice`);
    await page.locator('[data-testid="wf-row"][data-workflow="first.quick"]').waitFor();
    const done = await dash.client.enqueueMany(
      Quick,
      Array.from({ length: 55 }, (_, n) => ({ input: { n } })),
    );
    await Promise.all(done.map((run) => run.result({ timeoutMs: 10_000 })));
    const failed = await dash.client.enqueue(Quick, { n: -1 });
    await expect(failed.result({ timeoutMs: 10_000 })).rejects.toThrow('negative order');
    const later = await dash.client.enqueue(Quick, { n: 99 }, { delayMs: '1h' });

    // The overview's Completed link: a list, not a 400.
    await page.goto(`${dash.origin}/sluice`);
    await page.locator('[data-testid="wf-row"][data-workflow="first.quick"]').getByTestId('completed-link').click();
    await page.locator(`[data-testid="run-row"][data-run="${done[54].id}"]`).waitFor();
    expect(
      await page
        .locator('[data-testid="run-row"]')
        .evaluateAll((rows) => rows.every((row) => row.getAttribute('data-state') === 'completed')),
    ).toBe(true);
    expect(await page.getByTestId('completed-note').count()).toBe(0);

    // Every state, newest first (the defaults): the delayed run (due in an hour), then the run that failed last.
    await page.goto(`${dash.origin}/sluice#/runs?workflow=first.quick`);
    await page.getByTestId('run-row').first().waitFor();
    expect(await page.getByTestId('filter-state').inputValue()).toBe('all');
    expect(await page.getByTestId('filter-order').inputValue()).toBe('desc');
    const first = await page
      .getByTestId('run-row')
      .evaluateAll((rows) => rows.map((row) => [row.getAttribute('data-run'), row.getAttribute('data-state')]));
    expect(first.slice(0, 2)).toEqual([
      [later.id, 'delayed'],
      [failed.id, 'failed'],
    ]);
    expect(first).toHaveLength(50);
    await page.getByTestId('next-page').click();
    await page.getByText('Page 2').waitFor();
    const second = await page.getByTestId('run-row').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-run')));
    const seen = [...first.map(([id]) => id), ...second];
    expect(new Set(seen).size).toBe(seen.length);
    expect(new Set(seen)).toEqual(new Set([later.id, failed.id, ...done.map((run) => run.id)]));
    await page.getByTestId('prev-page').click();
    await page.getByText('Page 1').waitFor();

    // Oldest first: the first completed run leads.
    await page.getByTestId('filter-order').selectOption('asc');
    await page.getByTestId('filter-apply').click();
    await page.getByText('Page 1 · oldest first').waitFor();
    expect(await page.getByTestId('run-row').first().getAttribute('data-state')).toBe('completed');

    // Search by id.
    // The run is on the oldest-first page already: wait for the search's list of one, not the row.
    await page.getByTestId('filter-id').fill(done[7].id);
    await page.getByTestId('filter-apply').click();
    await page.waitForFunction(
      () => (globalThis as unknown as BrowserGlobals).document.querySelectorAll('[data-testid="run-row"]').length === 1,
    );
    expect(await page.getByTestId('run-row').getAttribute('data-run')).toBe(done[7].id);
    await page.getByTestId('filter-id').fill('no-such-run');
    await page.getByTestId('filter-apply').click();
    await page.getByTestId('runs-empty').filter({ hasText: 'No run “no-such-run”' }).waitFor();
    await page.context().close();
  });

  it("shows attempt 1's error and stack on a run that later completed, its failed call visible, paths redacted", async () => {
    const dash = await start(
      'express',
      [Flaky],
      { namespace: ns, worker: { concurrency: 2 } },
      { path: '/sluice', allowedHosts: [], redactStacks: true },
    );
    const run = await dash.client.enqueue(Flaky, {});
    await expect(run.result({ timeoutMs: 10_000 })).resolves.toBe('done');
    const page = await open();
    await page.goto(`${dash.origin}/sluice#/runs/${encodeURIComponent(run.id)}`);
    await page.getByTestId('run-state').filter({ hasText: 'completed' }).waitFor();
    const error = page.locator('[data-testid="attempt-error"][data-attempt="1"]');
    const text = await error.innerText();
    expect(text).toContain('Error: gateway timeout on the first attempt');
    expect(text).toMatch(/\n\s+at /); // the stack…
    expect(text).not.toContain(process.cwd()); // …without the server's absolute paths
    expect(text).toContain('first-hour.browser.spec.ts');
    expect(await page.locator('[data-testid="attempt-error"]').count()).toBe(1);
    const bar = page.locator('[data-testid="timeline"] .call-failed[data-key="charge#1"][data-attempt="1"]');
    expect(Number(await bar.getAttribute('width'))).toBeGreaterThanOrEqual(8);
    expect(await bar.locator('title').textContent()).toContain('gateway timeout on the first attempt');
    expect(await page.getByTestId('run-attempts').innerText()).toContain('2 started · 1 of 2 allowed failed');
    await page.context().close();
  });

  it('answers HTTP Basic with a sign-in prompt, admits the credentials, and loads when they are in the URL', async () => {
    const dash = await start(
      'fastify',
      [Quick],
      { namespace: ns, worker: { enabled: false } },
      { path: '/sluice', guard: basicAuthGuard({ username: 'ops', password: 's3cret' }) },
    );
    // The prompt: a 401 with WWW-Authenticate (headless Chromium cannot show the dialog, so the request is made directly).
    const stranger = await open();
    const refused = await stranger.request.get(`${dash.origin}/sluice`);
    expect(refused.status()).toBe(401);
    expect(refused.headers()['www-authenticate']).toBe('Basic realm="Sluice", charset="UTF-8"');
    expect(
      (
        await stranger.request.get(`${dash.origin}/sluice/api/overview`, {
          headers: { authorization: `Basic ${Buffer.from('ops:wrong').toString('base64')}` },
        })
      ).status(),
    ).toBe(401);
    await stranger.context().close();

    const signedIn = await open({ httpCredentials: { username: 'ops', password: 's3cret' } });
    expect((await signedIn.goto(`${dash.origin}/sluice`))!.status()).toBe(200);
    await signedIn.locator('[data-testid="wf-row"][data-workflow="first.quick"]').waitFor();
    await signedIn.context().close();

    // http://user:pass@host/sluice: the page loads, and so does every request it makes.
    const inUrl = await open();
    const { port } = new URL(dash.origin);
    expect((await inUrl.goto(`http://ops:s3cret@127.0.0.1:${port}/sluice`))!.status()).toBe(200);
    await inUrl.locator('[data-testid="wf-row"][data-workflow="first.quick"]').waitFor();
    await inUrl.goto(`http://ops:s3cret@127.0.0.1:${port}/sluice#/runs?workflow=first.quick`);
    await inUrl.getByTestId('runs-table').waitFor();
    await inUrl.context().close();
  });

  it("admits the app's own signed-in session through its guard class", async () => {
    const dash = await start(
      'express',
      [Quick],
      { namespace: ns, worker: { enabled: false } },
      { path: '/sluice', guard: SessionGuard },
      { providers: [Sessions, SessionGuard], controllers: [LoginController] },
    );
    const page = await open({}, true);
    const refused = await page.goto(`${dash.origin}/sluice`);
    expect(refused!.status()).toBe(401);
    // Signing in to the app (its login route sets the session cookie) is all the dashboard needs.
    expect((await page.context().request.get(`${dash.origin}/login`)).status()).toBe(200);
    expect((await page.goto(`${dash.origin}/sluice`))!.status()).toBe(200);
    await page.locator('[data-testid="wf-row"][data-workflow="first.quick"]').waitFor();
    await page.context().close();
  });

  it('admits this machine only with the loopback-only guard', async () => {
    const external = Object.values(networkInterfaces())
      .flat()
      .find((address) => address && address.family === 'IPv4' && !address.internal)?.address;
    if (!external) throw new Error('this test needs a non-loopback IPv4 address on the machine, to connect from');
    const dash = await start(
      'express',
      [Quick],
      { namespace: ns, worker: { enabled: false } },
      { path: '/sluice', guard: loopbackOnlyGuard, allowedHosts: [external] },
      { host: '0.0.0.0' },
    );
    const { port } = new URL(dash.origin);
    const page = await open({}, true);
    expect((await page.goto(`http://127.0.0.1:${port}/sluice`))!.status()).toBe(200);
    await page.locator('[data-testid="wf-row"][data-workflow="first.quick"]').waitFor();
    // The same app, reached at this machine's network address: the peer is not loopback.
    expect((await page.goto(`http://${external}:${port}/sluice`))!.status()).toBe(403);
    await page.context().close();
  });
});
