import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { readTimeline } from '../../lib/client/run.timeline';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { dropNamespace, rawRedis, redisUrl } from '../support/app';
import { packedApp, pageFiles } from '../support/packed-app';
import { pollUntil } from '../support/workflows';

const ROOT = resolve(__dirname, '..', '..');

/** A port nothing listens on now. */
function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
    server.on('error', reject);
  });
}

/** Starts the compiled app; resolves once it prints that it listens. */
function startApp(app: string, port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [join(app, 'out', 'src', 'main.js')], {
    cwd: app,
    env: { ...process.env, REDIS_URL: redisUrl(), PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolveChild, reject) => {
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (/Orders app on http:\/\/localhost:\d+/.test(output)) resolveChild(child);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('exit', (code) => reject(new Error(`the app exited (${code}) before it listened:\n${output}`)));
  });
}

/** Stops the app as Ctrl-C would, and waits for it to exit. */
function stopApp(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolveExit) => {
    child.once('exit', () => resolveExit());
    child.kill('SIGINT');
  });
}

/**
 * docs/getting-started.md as a new user follows it: its files (each ```ts block opening with a
 * `// src/<file>.ts` line) compiled with tsc against the package as published, the app started,
 * and the page's curl steps made: an order enqueued, parked in its durable wait, the app stopped
 * and started again mid-wait, the order approved and charged, and the dashboard served.
 */
describe('docs/getting-started.md', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-getting-started-'));
  let child: ChildProcess | undefined;
  afterAll(async () => {
    if (child) await stopApp(child);
    rmSync(dir, { recursive: true, force: true });
  });

  it('compiles as written, runs, and does what the page says', async () => {
    const files = pageFiles(readFileSync(join(ROOT, 'docs', 'getting-started.md'), 'utf8'));
    expect(Object.keys(files).sort()).toEqual(['src/app.module.ts', 'src/main.ts', 'src/order.workflow.ts', 'src/orders.controller.ts']);
    const { app, tscOutput } = await packedApp(dir, files);
    expect(tscOutput).toBe('');

    const redis = rawRedis();
    await dropNamespace(redis, 'orders');
    try {
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      const post = (path: string, body: unknown) =>
        fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const show = async () => (await fetch(`${base}/orders/order-1001`)).json() as Promise<{ state: string; result?: unknown }>;

      child = await startApp(app, port);
      expect(await (await post('/orders', { orderId: '1001', amount: 42 })).json()).toEqual({ runId: 'order-1001' });
      expect(await pollUntil(show, (run) => run.state !== 'waiting' && run.state !== 'active', 'the run to park', 10_000)).toEqual({
        state: 'waiting-signal',
      });

      // Stopped and started again while the run waits: it carries on from its wait.
      await stopApp(child);
      child = await startApp(app, port);
      const approved = await post('/orders/order-1001/approve', { by: 'ana' });
      expect(approved.status).toBe(201);
      expect(await approved.json()).toEqual({ delivered: true });
      const done = await pollUntil(show, (run) => run.state === 'completed', 'the run to complete', 10_000);
      expect(done.result).toEqual({
        orderId: '1001',
        status: 'charged',
        reservation: { reservationId: 'res-1001' },
        charge: { chargeId: 'ch-1001', amount: 42 },
        approvedBy: 'ana',
      });
      // reserveStock executed once, by the attempt before the wait; the attempt after it replayed it.
      const timeline = await readTimeline(redis, new RedisKeys('sluice', 'orders'), 'order-1001');
      const calls = timeline!.attempts.map((attempt) => attempt.calls.map((call) => `${call.key} ${call.status}`));
      expect(calls).toEqual([
        ['reserveStock#1 ok', 'signal:approved#1 waiting'],
        ['reserveStock#1 replayed', 'signal:approved#1 replayed', 'charge#1 ok'],
      ]);

      // Approved again once finished: the page's 409; an unknown run: 404.
      const again = await post('/orders/order-1001/approve', { by: 'ana' });
      expect([again.status, await again.json()]).toEqual([
        409,
        { message: 'Cannot signal run order-1001: it is completed, expected unfinished', error: 'Conflict', statusCode: 409 },
      ]);
      expect((await post('/orders/order-9999/approve', { by: 'ana' })).status).toBe(404);

      // The dashboard: its page, and the completed run in its runs list (indexCompleted).
      const dashboard = await fetch(`${base}/sluice`);
      expect(dashboard.status).toBe(200);
      expect(dashboard.headers.get('content-type')).toMatch(/text\/html/);
      const listed = (await (await fetch(`${base}/sluice/api/runs?workflow=order.fulfil`)).json()) as { runs: Array<{ id: string }> };
      expect(listed.runs.map((run) => run.id)).toEqual(['order-1001']);
    } finally {
      await dropNamespace(redis, 'orders');
      redis.disconnect();
    }
  }, 180_000);
});
