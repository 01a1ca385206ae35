import { type CanActivate, type ExecutionContext, Injectable, Module, UnauthorizedException } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import { request as httpRequest } from 'node:http';
import type Redis from 'ioredis';
import { InvalidOptionError, QueueConfigError, QueueModule, RunContext, Workflow } from '../../lib';
import { ASSET_BUDGET_BYTES, SluiceDashboardModule } from '../../lib/dashboard';
import { loadAssets } from '../../lib/dashboard/dashboard.assets';
import { dropNamespace, rawRedis, testConnection, uniqueNamespace } from '../support/app';
import { createDashboardApp, type DashboardApp, type HttpAdapterName } from '../support/dashboard-app';
import { pollUntil } from '../support/workflows';
import { LogCapture } from '../support/log-capture';

/**
 * The dashboard over HTTP on both Nest adapters: the page, its assets and the API behind the
 * guard, the security headers, the actions' CSRF rules and read-only default, typed errors as
 * HTTP statuses. (What the page draws is the browser suite's: test/browser.)
 */
@Workflow('dh.echo', { attempts: 1 })
class Echo {
  async run(input: unknown, ctx: RunContext) {
    await ctx.step('echo', () => input);
    return input;
  }
}

@Workflow('dh.rated', { groupRateLimit: { max: 1, perMs: 3_600_000 } })
class Rated {
  async run() {
    return 'ok';
  }
}

@Workflow('dh.fails', { attempts: 1 })
class Fails {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.step('boom', () => {
      throw new Error('boom');
    });
  }
}

/** Started by the event `dh.signup` (QueueClient.publish): the runs page shows and filters by it. */
@Workflow('dh.welcome', { attempts: 1, on: 'dh.signup' })
class Welcome {
  async run(input: { user: string }) {
    return `welcome ${input.user}`;
  }
}

/** A guard class of the app's own: 401 unless the request carries the test's token. */
@Injectable()
class TokenGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>();
    if (request.headers['x-token'] !== 'let-me-in') throw new UnauthorizedException('no token');
    return true;
  }
}

const USER = { 'x-token': 'let-me-in' };

/** A request with a target and a Host of our choosing (fetch normalises the one and refuses to set the other). */
function rawRequest(
  origin: string,
  target: string,
  headers: Record<string, string>,
  method = 'GET',
  body?: string,
): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: hostname, port, path: target, headers, method }, (response) => {
      let text = '';
      response.on('data', (chunk) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, body: text }));
    });
    request.on('error', reject);
    request.end(body);
  });
}

/** The parts of the API's JSON replies these tests read: the wire shape, not lib's in-memory views. */
interface MessageReply {
  message: string;
}
interface OverviewReply {
  readOnly: boolean;
  throughput: { stepMs: number };
  workflows: Array<{ name: string }>;
}
interface RunsReply {
  runs: Array<{ id: string; error?: unknown; dedupe?: unknown; event?: { name: string; id: string } }>;
}
interface RunReply {
  run: { input: unknown; dedupe?: unknown; event?: { name: string; id: string } };
  timeline: { attempts: Array<{ calls: Array<{ key: string; status: string }> }> };
}

/** The reply's JSON body, typed as the test expects it (the assertions check it). */
async function jsonOf<T>(reply: Response | Promise<Response>): Promise<T> {
  return (await (await reply).json()) as T;
}

async function rawGet(origin: string, target: string, headers: Record<string, string>): Promise<string> {
  return (await rawRequest(origin, target, headers)).body;
}

/** How the page encodes a run id into an API path: its own `apiSeg`, taken from the shipped script. */
function pageSegment(): (id: string) => string {
  const source = /const apiSeg = (\(x\) => \{.*\});/.exec(loadAssets().get('dashboard.js')!.body)?.[1];
  if (!source) throw new Error('dashboard.js has no apiSeg: the test cannot build URLs as the page does');
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- deliberate: the test must run the page's own shipped apiSeg, not a copy of it
  return new Function('enc', `return ${source};`)(encodeURIComponent) as (id: string) => string;
}
const ACTION = { ...USER, 'content-type': 'application/json', 'x-sluice-csrf': '1' };

/** A guard class whose dependency no module provides. */
class MissingDependency {}
@Injectable()
class UnmakeableGuard implements CanActivate {
  constructor(readonly dependency: MissingDependency) {}
  canActivate(): boolean {
    return true;
  }
}

/** What a ConfigModule would give: settings, exported by a module of their own. */
@Injectable()
class Settings {
  readonly readOnly = false;
  readonly token = 'from-settings';
}
@Module({ providers: [Settings], exports: [Settings] })
class SettingsModule {}

/** A guard class that needs Settings: made by the dashboard, from its forRootAsync imports. */
@Injectable()
class SettingsGuard implements CanActivate {
  constructor(private readonly settings: Settings) {}
  canActivate(context: ExecutionContext): boolean {
    return context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers['x-token'] === this.settings.token;
  }
}

describe('dashboard options', () => {
  it('fails the bootstrap, not every request, when the guard class cannot be made', async () => {
    await expect(
      createDashboardApp(
        'express',
        [],
        { namespace: uniqueNamespace('dh-bad'), worker: { enabled: false } },
        { path: '/sluice', guard: UnmakeableGuard },
      ),
    ).rejects.toThrow(/cannot make the guard UnmakeableGuard.*Register it as a provider/);
  });

  it('takes its options from a factory with forRootAsync, and a guard whose dependency comes from its imports', async () => {
    const app = await Test.createTestingModule({
      imports: [
        QueueModule.forRoot({ connection: testConnection(), namespace: uniqueNamespace('dh-async'), worker: { enabled: false } }),
        SluiceDashboardModule.forRootAsync({
          path: '/async',
          imports: [SettingsModule],
          inject: [Settings],
          useFactory: (settings: Settings) => ({ readOnly: settings.readOnly, guard: SettingsGuard }),
        }),
      ],
    }).compile();
    const http = app.createNestApplication(new ExpressAdapter(), { logger: false });
    await http.listen(0, '127.0.0.1');
    try {
      const origin = `http://127.0.0.1:${(http.getHttpServer().address() as { port: number }).port}`;
      expect((await fetch(`${origin}/async`)).status).toBe(403);
      const page = await fetch(`${origin}/async`, { headers: { 'x-token': 'from-settings' } });
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('&#34;readOnly&#34;:false');
    } finally {
      await http.close();
    }
    expect(() => SluiceDashboardModule.forRootAsync({ path: 'no-slash', useFactory: () => ({}) })).toThrow(QueueConfigError);
  });

  it('warns once, not once per instance of its guard, that it has no guard', async () => {
    const logs = new LogCapture();
    const app = await Test.createTestingModule({
      imports: [
        QueueModule.forRoot({ connection: testConnection(), namespace: uniqueNamespace('dh-warn'), worker: { enabled: false } }),
        SluiceDashboardModule.forRoot({ path: '/open' }),
      ],
    }).compile();
    const http = app.createNestApplication(new ExpressAdapter(), { logger: logs });
    await http.init();
    await http.close();
    expect(logs.find('warn', 'has no guard')).toHaveLength(1);
  });

  it('answers 503 within redisTimeoutMs while Redis is away, and still serves its page', async () => {
    // Nothing listens on port 1: every Redis call is refused until redisTimeoutMs.
    const away = await createDashboardApp(
      'express',
      [],
      {
        namespace: uniqueNamespace('dh-away'),
        connection: { url: 'redis://127.0.0.1:1' },
        redisTimeoutMs: 300,
        worker: { enabled: false },
        migrate: false,
      },
      { path: '/sluice', readOnly: false },
    );
    try {
      // Each call comes back (a typed RedisConnectionError mapped to 503), none hangs.
      for (const path of [
        '/api/overview',
        '/api/runs/r1',
        '/api/runs?workflow=w&state=failed',
        '/api/workflows/w/groups',
        '/api/schedules',
      ]) {
        const reply = await fetch(`${away.origin}/sluice${path}`);
        expect([path, reply.status]).toEqual([path, 503]);
      }
      const action = await fetch(`${away.origin}/sluice/api/runs/r1/cancel`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-sluice-csrf': '1' },
        body: '{}',
      });
      expect(action.status).toBe(503);
      expect((await fetch(`${away.origin}/sluice`)).status).toBe(200);
      // Unguarded, a foreign Host is refused before any Redis call: a 403 at once, not a 503.
      expect((await rawRequest(away.origin, '/sluice/api/overview', { host: 'evil.example' })).status).toBe(403);
    } finally {
      await away.close();
    }
  });

  it('refuses a bad path or option before the app boots', () => {
    for (const options of [
      { path: 'sluice' },
      { path: '/' },
      { path: '/a b' },
      { path: '/x', pollMs: 10 },
      { path: '/x', readOnly: 'no' },
      { path: '/x', guard: 'admin' },
    ]) {
      expect(() => SluiceDashboardModule.forRoot(options as never)).toThrow(QueueConfigError);
    }
    for (const allowedHosts of ['ops.example.com', ['https://ops.example.com'], ['ops.example.com/sluice'], [''], [42]]) {
      expect(() => SluiceDashboardModule.forRoot({ path: '/x', allowedHosts } as never)).toThrow(/allowedHosts/);
    }
    expect(() => SluiceDashboardModule.forRoot({ path: '/x', allowedHost: ['a'] } as never)).toThrow(InvalidOptionError);
    expect(() => SluiceDashboardModule.forRoot({ path: '/x', allowedHost: ['a'] } as never)).toThrow(
      /options\.allowedHost: .*did you mean `allowedHosts`\?/,
    );
    expect(() => SluiceDashboardModule.forRootAsync({ path: '/x', readOnly: false, useFactory: () => ({}) } as never)).toThrow(
      /forRootAsync options\.readOnly: is not an option here/,
    );
  });

  it('with a guard and allowedHosts, checks the Host first, then the guard', async () => {
    const both = await createDashboardApp(
      'fastify',
      [],
      { namespace: uniqueNamespace('dh-both'), worker: { enabled: false } },
      { path: '/sluice', guard: () => true, allowedHosts: ['ops.example.com'] },
    );
    try {
      expect((await rawRequest(both.origin, '/sluice/api/overview', { host: 'evil.example' })).status).toBe(403);
      expect((await rawRequest(both.origin, '/sluice/api/overview', { host: 'ops.example.com' })).status).toBe(200);
      expect((await fetch(`${both.origin}/sluice/api/overview`)).status).toBe(200);
    } finally {
      await both.close();
    }
  });
});

describe.each<HttpAdapterName>(['express', 'fastify'])('dashboard over HTTP (%s)', (adapter) => {
  const ns = uniqueNamespace('dh');
  let redis: Redis;
  let dash: DashboardApp;
  let readOnly: DashboardApp;
  let open: DashboardApp;
  let listed: DashboardApp;
  const url = (path: string) => `${dash.origin}/sluice${path}`;

  beforeAll(async () => {
    redis = rawRedis();
    dash = await createDashboardApp(
      adapter,
      [Echo, Fails, Rated, Welcome],
      { namespace: ns },
      { path: '/sluice/', guard: TokenGuard, readOnly: false },
      { providers: [TokenGuard] },
    );
    readOnly = await createDashboardApp(
      adapter,
      [],
      { namespace: ns, worker: { enabled: false } },
      { path: '/ops/queues', guard: (request: { headers: Record<string, string> }) => request.headers['x-token'] === 'let-me-in' },
    );
    // No guard: only the loopback names, or those and the listed hosts.
    open = await createDashboardApp(adapter, [], { namespace: ns, worker: { enabled: false } }, { path: '/open', readOnly: false });
    listed = await createDashboardApp(
      adapter,
      [],
      { namespace: ns, worker: { enabled: false } },
      { path: '/open', readOnly: false, allowedHosts: ['ops.example.com', 'Intranet:8443', '10.0.0.5', '[fd00::1]'] },
    );
  });

  afterAll(async () => {
    await dash?.close();
    await readOnly?.close();
    await open?.close();
    await listed?.close();
    await dropNamespace(redis, ns);
    redis.disconnect();
  });

  it('serves the page with a strict CSP and its two assets within budget', async () => {
    const page = await fetch(url(''), { headers: USER });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await page.text();
    expect(html).toContain('<script src="/sluice/assets/dashboard.js" defer>');
    expect(html).toContain('&#34;readOnly&#34;:false');
    // The base comes from the request path: a crafted one is escaped, never markup.
    const crafted = await (await fetch(url('?"><script>x</script>'), { headers: USER })).text();
    expect(crafted).not.toContain('<script>x');
    let total = 0;
    for (const [name, type] of [
      ['dashboard.js', 'text/javascript'],
      ['dashboard.css', 'text/css'],
    ]) {
      const asset = await fetch(url(`/assets/${name}`), { headers: USER });
      expect(asset.status).toBe(200);
      expect(asset.headers.get('content-type')).toContain(type);
      total += (await asset.text()).length;
    }
    expect(total).toBeLessThan(ASSET_BUDGET_BYTES);
    expect((await fetch(url('/assets/other.js'), { headers: USER })).status).toBe(404);
  });

  it('answers 401 from a refusing guard class, and 403 from a refusing function, on pages, assets and the API alike', async () => {
    for (const path of ['', '/assets/dashboard.js', '/api/overview', '/api/runs?workflow=dh.echo&state=failed']) {
      expect((await fetch(url(path))).status).toBe(401);
      expect((await fetch(url(path), { headers: { 'x-token': 'wrong' } })).status).toBe(401);
      expect((await fetch(`${readOnly.origin}/ops/queues${path}`)).status).toBe(403);
    }
    expect(
      (
        await fetch(url('/api/workflows/dh.echo/pause'), {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-sluice-csrf': '1' },
          body: '{}',
        })
      ).status,
    ).toBe(401);
    expect((await fetch(`${readOnly.origin}/ops/queues`, { headers: USER })).status).toBe(200);
  });

  it('reads the overview, runs, a run with its timeline and the groups', async () => {
    const ok = await dash.client.enqueue(Echo, { html: '<script>alert(1)</script>' });
    await ok.result({ timeoutMs: 10_000 });
    const bad = await dash.client.enqueue(Fails, {}, { group: 'tenant-a' });
    await expect(bad.result({ timeoutMs: 10_000 })).rejects.toThrow('boom');
    const overview = await jsonOf<OverviewReply>(fetch(url('/api/overview'), { headers: USER }));
    const echo = overview.workflows.find((w) => w.name === 'dh.echo');
    expect(echo).toMatchObject({ completed: 1, failed: 0, paused: false });
    expect(overview.readOnly).toBe(false);
    expect(overview.throughput.stepMs).toBe(5000);
    const runs = await jsonOf<RunsReply>(fetch(url('/api/runs?workflow=dh.fails&state=failed'), { headers: USER }));
    expect(runs.runs.map((r) => r.id)).toEqual([bad.id]);
    expect(runs.runs[0].error).toEqual({ name: 'Error', message: 'boom' });
    const detail = await jsonOf<RunReply>(fetch(url(`/api/runs/${encodeURIComponent(ok.id)}`), { headers: USER }));
    expect(detail.run.input).toEqual({ html: '<script>alert(1)</script>' });
    expect(detail.timeline.attempts[0].calls.map((c) => `${c.key}:${c.status}`)).toEqual(['echo#1:ok']);
    const failed = await jsonOf<RunReply>(fetch(url(`/api/runs/${bad.id}`), { headers: USER }));
    expect(failed.timeline.attempts[0].calls[0].status).toBe('failed');
    const groups = await jsonOf<unknown>(fetch(url('/api/workflows/dh.fails/groups'), { headers: USER }));
    expect(groups).toMatchObject({ offset: 0, next: null, omitted: 0 });
  });

  it("shows each group's rate limit and filters the groups: held by their rate limit, paused, by name", async () => {
    // Paused before their runs arrive, so the runs wait (and the groups stay listed).
    await dash.client.pause({ workflow: Rated, group: 'eu-paused' });
    await dash.client.pause({ workflow: Rated, group: 'us-paused' });
    const first = await dash.client.enqueue(Rated, {}, { group: 'eu-slow' });
    await first.result({ timeoutMs: 10_000 });
    await dash.client.enqueueMany(Rated, [
      { input: {}, opts: { group: 'eu-slow' } },
      { input: {}, opts: { group: 'eu-paused' } },
      { input: {}, opts: { group: 'us-paused' } },
    ]);
    type GroupsReply = { groups: Array<{ name: string; rateLimit: unknown; rateHeldUntil?: string; paused: boolean }> };
    const names = async (query: string) =>
      (await jsonOf<GroupsReply>(fetch(url(`/api/workflows/dh.rated/groups${query}`), { headers: USER }))).groups.map((g) => g.name).sort();
    // The second run of eu-slow waits out its hour-long window: held by its rate limit.
    await pollUntil(
      () => names('?only=rate-held'),
      (found) => found.join() === 'eu-slow',
      'eu-slow held by its rate limit',
    );
    const all = await jsonOf<GroupsReply>(fetch(url('/api/workflows/dh.rated/groups'), { headers: USER }));
    const slow = all.groups.find((g) => g.name === 'eu-slow')!;
    expect(slow.rateLimit).toEqual({ max: 1, perMs: 3_600_000 });
    expect(new Date(slow.rateHeldUntil!).getTime()).toBeGreaterThan(Date.now() + 3_000_000);
    expect(await names('?only=paused')).toEqual(['eu-paused', 'us-paused']);
    expect(await names('?q=EU')).toEqual(['eu-paused', 'eu-slow']);
    expect(await names('?only=paused&q=us-')).toEqual(['us-paused']);
    expect((await fetch(url('/api/workflows/dh.rated/groups?only=bogus'), { headers: USER })).status).toBe(400);
    await dash.client.resume({ workflow: Rated, group: 'eu-paused' });
    await dash.client.resume({ workflow: Rated, group: 'us-paused' });
  });

  it('shows a run’s dedupe and filters runs by dedupe key (dedupe=)', async () => {
    const dedupe = { key: `dh-${Date.now()}`, ttlMs: 60_000, mode: 'debounce' as const };
    const first = await dash.client.enqueue(Echo, { n: 1 }, { dedupe });
    await dash.client.enqueue(Echo, { n: 2 }, { dedupe });
    const other = await dash.client.enqueue(Echo, { n: 3 }, { dedupe: { ...dedupe, key: `${dedupe.key}-other` } });
    try {
      const all = await jsonOf<RunsReply>(fetch(url('/api/runs?workflow=dh.echo&state=delayed'), { headers: USER }));
      expect(all.runs.map((r) => r.id)).toEqual(expect.arrayContaining([first.id, other.id]));
      for (const state of ['delayed', 'all']) {
        const runs = await jsonOf<RunsReply>(
          fetch(url(`/api/runs?workflow=dh.echo&state=${state}&dedupe=${encodeURIComponent(dedupe.key)}`), { headers: USER }),
        );
        expect(runs.runs.map((r) => r.id)).toEqual([first.id]);
        expect(runs.runs[0].dedupe).toEqual({ key: dedupe.key, mode: 'debounce', count: 2, inputSeq: 2 });
      }
      const detail = await jsonOf<RunReply>(fetch(url(`/api/runs/${first.id}`), { headers: USER }));
      expect(detail.run.input).toEqual({ n: 2 });
      expect(detail.run.dedupe).toEqual({ key: dedupe.key, mode: 'debounce', count: 2, inputSeq: 2 });
      expect((await fetch(url('/api/runs?workflow=dh.echo&state=delayed&dedupe=a%20b'), { headers: USER })).status).toBe(400);
    } finally {
      await dash.client.cancel(first.id);
      await dash.client.cancel(other.id);
    }
  });

  it('shows the event that started a run, and filters the runs by event name or event id', async () => {
    const first = await readOnly.client.publish('dh.signup', { user: 'ada' }, { id: `signup-ada-${adapter}` });
    const second = await readOnly.client.publish('dh.signup', { user: 'bob' });
    await Promise.all([...first.runs, ...second.runs].map((run) => run.result({ timeoutMs: 10_000 })));
    const runId = first.runs[0].id;
    const detail = await jsonOf<RunReply>(fetch(url(`/api/runs/${encodeURIComponent(runId)}`), { headers: USER }));
    expect(detail.run.event).toEqual({ name: 'dh.signup', id: first.id });

    const byId = await jsonOf<RunsReply>(fetch(url(`/api/runs?eventId=${first.id}`), { headers: USER }));
    expect(byId.runs.map((r) => [r.id, r.event])).toEqual([[runId, { name: 'dh.signup', id: first.id }]]);
    const byName = await jsonOf<RunsReply>(fetch(url('/api/runs?event=dh.signup'), { headers: USER }));
    expect(byName.runs.map((r) => r.id)).toEqual(expect.arrayContaining([runId, second.runs[0].id]));
    expect(byName.runs.every((r) => r.event?.name === 'dh.signup')).toBe(true);
    expect((await jsonOf<RunsReply>(fetch(url('/api/runs?event=dh.other'), { headers: USER }))).runs).toEqual([]);
    // A run with no event is shown without one.
    const plain = await jsonOf<RunsReply>(fetch(url('/api/runs?workflow=dh.fails&state=failed'), { headers: USER }));
    expect(plain.runs.every((r) => r.event === undefined)).toBe(true);
    // The page has the controls, and shows the event on the list and the run.
    const script = await (await fetch(url('/assets/dashboard.js'), { headers: USER })).text();
    for (const testid of ['filter-event', 'filter-event-id', 'run-event', 'event-id-link']) expect(script).toContain(`'${testid}'`);
    expect((await fetch(url('/api/runs?eventId=a%20b'), { headers: USER })).status).toBe(400);
  });

  it("lists one workflow's schedules, cron and interval alike", async () => {
    await dash.client.schedule(`dh-every-${adapter}`, Echo, { every: '1h', input: null });
    await dash.client.schedule(`dh-cron-${adapter}`, Fails, { cron: '0 0 1 1 *' });
    try {
      type SchedulesReply = { schedules: Array<{ id: string; every?: number; cron?: string }> };
      const echo = await jsonOf<SchedulesReply>(fetch(url('/api/schedules?workflow=dh.echo'), { headers: USER }));
      expect(echo.schedules.map((s) => [s.id, s.every, s.cron])).toEqual([[`dh-every-${adapter}`, 3_600_000, undefined]]);
      const fails = await jsonOf<SchedulesReply>(fetch(url('/api/schedules?workflow=dh.fails'), { headers: USER }));
      expect(fails.schedules.map((s) => s.id)).toEqual([`dh-cron-${adapter}`]);
      expect((await fetch(url('/api/schedules?workflow=a%20b'), { headers: USER })).status).toBe(400);
    } finally {
      await dash.client.unschedule(`dh-every-${adapter}`);
      await dash.client.unschedule(`dh-cron-${adapter}`);
    }
  });

  it('answers typed errors with their HTTP status', async () => {
    expect((await fetch(url('/api/runs/no-such-run'), { headers: USER })).status).toBe(404);
    expect((await fetch(url('/api/runs?workflow=dh.echo&state=bogus'), { headers: USER })).status).toBe(400);
    expect((await fetch(url('/api/runs?workflow=nope&state=failed'), { headers: USER })).status).toBe(404);
    expect((await fetch(url('/api/workflows/dh.echo/groups?offset=-1'), { headers: USER })).status).toBe(400);
    const retryCompleted = await fetch(url('/api/runs/no-such-run/retry'), { method: 'POST', headers: ACTION, body: '{}' });
    expect(retryCompleted.status).toBe(404);
    expect((await jsonOf<MessageReply>(retryCompleted)).message).toContain('no-such-run');
    const badCap = await fetch(url('/api/workflows/dh.echo/limits'), {
      method: 'POST',
      headers: ACTION,
      body: JSON.stringify({ limit: -3 }),
    });
    expect(badCap.status).toBe(400);
  });

  it('takes an action only from the page: a JSON body, the CSRF header, the same origin', async () => {
    const pause = (headers: Record<string, string>, body = '{}') =>
      fetch(url('/api/workflows/dh.echo/pause'), { method: 'POST', headers, body });
    expect((await pause({ ...USER, 'content-type': 'application/json' })).status).toBe(403);
    expect((await pause({ ...USER, 'x-sluice-csrf': '1', 'content-type': 'text/plain' })).status).toBe(403);
    expect((await pause({ ...ACTION, origin: 'https://evil.example' })).status).toBe(403);
    expect((await pause({ ...ACTION, 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect((await dash.client.stats({ workflow: 'dh.echo' })).workflows['dh.echo'].paused).toBe(false);
    const done = await pause({ ...ACTION, origin: dash.origin, 'sec-fetch-site': 'same-origin' });
    expect(done.status).toBe(200);
    expect((await jsonOf<MessageReply>(done)).message).toMatch(/^Paused dh\.echo/);
    expect((await dash.client.stats({ workflow: 'dh.echo' })).workflows['dh.echo'].paused).toBe(true);
    const again = await jsonOf<MessageReply>(pause(ACTION));
    expect(again.message).toBe('Nothing changed: dh.echo was already paused');
    const resumed = await fetch(url('/api/workflows/dh.echo/resume'), { method: 'POST', headers: ACTION, body: '{}' });
    expect((await jsonOf<MessageReply>(resumed)).message).toBe('Resumed dh.echo');
    const cap = await jsonOf<MessageReply>(
      fetch(url('/api/workflows/dh.echo/limits'), { method: 'POST', headers: ACTION, body: JSON.stringify({ group: '*', limit: 4 }) }),
    );
    expect(cap.message).toBe('Cap of every group of dh.echo set to 4 (it was none)');
    expect((await dash.client.getLimits({ workflow: 'dh.echo', group: 'x' })).groupDefault).toBe(4);
  });

  it('answers only its own page: cross-site reads are refused, a proxy that rewrites Host is not', async () => {
    expect((await fetch(url('/api/overview'), { headers: { ...USER, 'sec-fetch-site': 'cross-site' } })).status).toBe(403);
    expect((await fetch(url('/api/overview'), { headers: { ...USER, origin: 'https://evil.example' } })).status).toBe(403);
    expect((await fetch(url('/api/overview'), { headers: { ...USER, 'sec-fetch-site': 'same-origin' } })).status).toBe(200);
    // Behind a proxy the Host seen here differs from the browser's Origin; Sec-Fetch-Site tells the truth.
    const proxied = await fetch(url('/api/workflows/dh.echo/resume'), {
      method: 'POST',
      headers: { ...ACTION, origin: 'https://ops.example', 'sec-fetch-site': 'same-origin' },
      body: '{}',
    });
    expect(proxied.status).toBe(200);
  });

  it('points the page at its own path only, and revalidates its assets with an ETag', async () => {
    // A request target in absolute form names another host: the page must not load from it.
    const html = await rawGet(dash.origin, 'http://evil.example/sluice', USER);
    expect(html).toContain('src="/sluice/assets/dashboard.js"');
    expect(html).not.toContain('evil.example');
    const first = await fetch(url('/assets/dashboard.js'), { headers: USER });
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^"/);
    const again = await fetch(url('/assets/dashboard.js'), { headers: { ...USER, 'if-none-match': etag } });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe('');
  });

  it('is read-only unless actions are enabled', async () => {
    const refused = await fetch(`${readOnly.origin}/ops/queues/api/workflows/dh.echo/pause`, {
      method: 'POST',
      headers: ACTION,
      body: '{}',
    });
    expect(refused.status).toBe(403);
    expect((await jsonOf<MessageReply>(refused)).message).toContain('readOnly: false');
    expect((await readOnly.client.stats({ workflow: 'dh.echo' })).workflows['dh.echo'].paused).toBe(false);
  });

  it('without a guard, answers loopback hosts and allowedHosts only: a DNS-rebound page gets 403 on pages, reads and actions', async () => {
    const pause = [
      '/open/api/workflows/dh.echo/pause',
      { 'content-type': 'application/json', 'x-sluice-csrf': '1' },
      'POST',
      '{}',
    ] as const;
    const targets = [
      '/open',
      '/open/assets/dashboard.js',
      '/open/api/overview',
      '/open/api/runs/r1',
      '/open/api/runs?workflow=dh.echo&state=failed',
    ];
    for (const app of [open, listed]) {
      const port = new URL(app.origin).port;
      for (const host of [
        'evil.example',
        `evil.example:${port}`,
        'localhost.evil.example',
        '127.0.0.1.nip.io',
        'ops.example.com.evil.example',
        'intranet:80',
      ]) {
        for (const target of targets) {
          const refused = await rawRequest(app.origin, target, { host });
          expect([host, target, refused.status]).toEqual([host, target, 403]);
          expect(JSON.parse(refused.body).message).toContain('DNS rebinding');
        }
        const action = await rawRequest(app.origin, pause[0], { ...pause[1], host }, pause[2], pause[3]);
        expect([host, action.status]).toEqual([host, 403]);
      }
      expect((await app.client.stats({ workflow: 'dh.echo' })).workflows['dh.echo'].paused).toBe(false);
      for (const host of ['localhost', `localhost:${port}`, `LOCALHOST:${port}`, `127.0.0.1:${port}`, '[::1]', `[::1]:${port}`]) {
        expect([host, (await rawRequest(app.origin, '/open', { host })).status]).toEqual([host, 200]);
        expect([host, (await rawRequest(app.origin, '/open/api/overview', { host })).status]).toEqual([host, 200]);
      }
    }
    for (const host of ['ops.example.com', 'OPS.example.com:443', 'intranet:8443', '10.0.0.5:3000', '[fd00::1]:8080']) {
      expect([host, (await rawRequest(listed.origin, '/open/api/overview', { host })).status]).toEqual([host, 200]);
      expect([host, (await rawRequest(open.origin, '/open/api/overview', { host })).status]).toEqual([host, 403]);
    }
    const done = await rawRequest(listed.origin, pause[0], { ...pause[1], host: 'ops.example.com' }, pause[2], pause[3]);
    expect(JSON.parse(done.body).message).toMatch(/^Paused dh\.echo/);
    await rawRequest(listed.origin, '/open/api/workflows/dh.echo/resume', { ...pause[1], host: 'ops.example.com' }, 'POST', '{}');
    // With a guard (and no allowedHosts) the guard decides, whatever the Host.
    expect((await rawRequest(dash.origin, '/sluice/api/overview', { ...USER, host: 'ops.example.com' })).status).toBe(200);
  });

  it('opens runs whose ids are dots, or hold / # : @ = +, at the URLs the page builds', async () => {
    const segment = pageSegment();
    // Every character checkId allows besides letters and digits, in the shapes URL parsers rewrite.
    const ids = ['.', '..', '...', 'a/b', '../up', './x', 'a/../b', 'x#y', 'a:b@c=d+e_f'];
    for (const id of ids) await (await dash.client.enqueue(Echo, { id }, { id })).result({ timeoutMs: 10_000 });
    for (const id of ids) {
      const reply = await fetch(url(`/api/runs/${segment(id)}`), { headers: USER });
      expect([id, reply.status]).toEqual([id, 200]);
      expect((await jsonOf<RunReply>(reply)).run.input).toEqual({ id });
    }
    // The actions take the same URLs: cancel (a finished run: nothing to do) and remove.
    const cancel = await fetch(url(`/api/runs/${segment('..')}/cancel`), { method: 'POST', headers: ACTION, body: '{}' });
    expect((await jsonOf<MessageReply>(cancel)).message).toBe('Run .. had already finished (completed): nothing to cancel');
    const removed = await fetch(url(`/api/runs/${segment('.')}/remove`), { method: 'POST', headers: ACTION, body: '{}' });
    expect((await jsonOf<MessageReply>(removed)).message).toBe('Removed run .');
    expect(await dash.client.get('.')).toBeNull();
    expect(await dash.client.get('..')).not.toBeNull();
  });
});
