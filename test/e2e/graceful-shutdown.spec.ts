import { Inject } from '@nestjs/common';
import Redis from 'ioredis';
import { setTimeout as delay } from 'node:timers/promises';
import { RunContext, Workflow } from '../../lib';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';

/** Per-run bookkeeping of one test, kept in this process (every app lives here). */
class Ledger {
  readonly executions = new Map<string, number>();
  finished = 0;
  private wanted?: { count: number; resolve: () => void };

  start(runId: string): void {
    this.executions.set(runId, (this.executions.get(runId) ?? 0) + 1);
    if (this.wanted && this.executions.size >= this.wanted.count) this.wanted.resolve();
  }

  /** Resolves once `count` distinct runs have started. */
  started(count: number): Promise<void> {
    return new Promise((resolve) => {
      this.wanted = { count, resolve };
      if (this.executions.size >= count) resolve();
    });
  }
}

const slowLedger = new Ledger();

@Workflow('gs.slow')
class SlowWorkflow {
  async run(input: { i: number }, ctx: RunContext): Promise<number> {
    slowLedger.start(ctx.runId);
    await delay(200); // the work itself
    slowLedger.finished++;
    return input.i;
  }
}

const fastLedger = new Ledger();

@Workflow('gs.fast')
class FastWorkflow {
  run(input: { i: number }, ctx: RunContext): number {
    fastLedger.start(ctx.runId);
    return input.i;
  }
}

const MODE = 'MODE';
interface HangMode {
  hang: boolean;
  ledger: Ledger;
}

@Workflow('gs.hang')
class HangWorkflow {
  constructor(@Inject(MODE) private readonly mode: HangMode) {}

  async run(input: { i: number }, ctx: RunContext): Promise<{ i: number; attempt: number }> {
    this.mode.ledger.start(ctx.runId);
    if (this.mode.hang) {
      // Never settles on its own: only the abort signal (shutdown deadline) ends it.
      await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true }));
    }
    return { i: input.i, attempt: ctx.attempt };
  }
}

describe('graceful shutdown', () => {
  let redis: Redis;
  const apps: TestApp[] = [];
  const namespaces: string[] = [];
  const open = async (...args: Parameters<typeof createApp>) => {
    namespaces.push(args[1].namespace);
    const app = await createApp(...args);
    apps.push(app);
    return app;
  };
  const close = async (app: TestApp) => {
    apps.splice(apps.indexOf(app), 1);
    await app.close();
  };

  beforeAll(() => {
    redis = rawRedis();
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    for (const ns of new Set(namespaces)) await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('drains in-flight runs on app.close(): nothing is lost and nothing runs twice', async () => {
    const ns = uniqueNamespace('drain');
    const base = `{sluice:${ns}}:`;
    const producer = await open([], { namespace: ns, worker: { enabled: false } });
    const worker = await open([SlowWorkflow], { namespace: ns, worker: { concurrency: 5 } });

    const handles = await producer.client.enqueueMany(
      SlowWorkflow,
      Array.from({ length: 20 }, (_, i) => ({ input: { i } })),
    );
    await slowLedger.started(1);
    const inFlightAtClose = slowLedger.executions.size - slowLedger.finished;
    expect(inFlightAtClose).toBeGreaterThanOrEqual(1);
    await close(worker);

    // Every run the closed worker started finished as completed; the rest are untouched.
    const startedByFirst = new Set(slowLedger.executions.keys());
    expect(slowLedger.finished).toBe(startedByFirst.size);
    for (const h of handles) {
      const info = await producer.client.get(h.id);
      if (startedByFirst.has(h.id)) expect(info).toMatchObject({ state: 'completed', attempts: 1, failures: 0 });
      else expect(info).toMatchObject({ state: 'waiting', attempts: 0, failures: 0 });
    }
    expect(startedByFirst.size).toBeLessThan(20);
    expect(await redis.scard(`${base}wf:gs.slow:active`)).toBe(0);
    expect(await redis.zcard(`${base}leases`)).toBe(0);
    expect((await producer.client.stats({ workflow: SlowWorkflow })).workflows['gs.slow'].waiting).toBe(20 - startedByFirst.size);

    await open([SlowWorkflow], { namespace: ns, worker: { concurrency: 5 } });
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 15_000 })));
    expect(results).toEqual(handles.map((_, i) => i));
    expect(slowLedger.executions.size).toBe(20);
    expect([...slowLedger.executions.entries()].filter(([, n]) => n !== 1)).toEqual([]);
  });

  it('hands the runs a worker of short runs held ready back to the queue at close, unfailed and unstarted', async () => {
    const ns = uniqueNamespace('held');
    const base = `{sluice:${ns}}:`;
    const producer = await open([], { namespace: ns, worker: { enabled: false } });
    const handles = await producer.client.enqueueMany(
      FastWorkflow,
      Array.from({ length: 3_000 }, (_, i) => ({ input: { i } })),
    );
    const worker = await open([FastWorkflow], { namespace: ns, worker: { concurrency: 2 } });
    await fastLedger.started(1_000);
    await close(worker);

    // Nothing stays leased: the held runs went back (a lease left behind would hold them for lockMs).
    expect(await redis.zcard(`${base}leases`)).toBe(0);
    const infos = await Promise.all(handles.map((h) => producer.client.get(h.id)));
    expect(infos.filter((info) => info?.state !== 'completed' && info?.state !== 'waiting')).toEqual([]);
    const backUnstarted = infos.filter(
      (info, i) => info?.state === 'waiting' && info.attempts === 1 && !fastLedger.executions.has(handles[i].id),
    );
    expect(backUnstarted.length).toBeGreaterThan(0); // some were held when the worker closed
    expect(backUnstarted.every((info) => info?.failures === 0)).toBe(true);

    await open([FastWorkflow], { namespace: ns, worker: { concurrency: 2 } });
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));
    expect(results).toEqual(handles.map((_, i) => i));
    expect([...fastLedger.executions.values()].filter((n) => n !== 1)).toEqual([]);
    expect(fastLedger.executions.size).toBe(3_000);
  });

  it('hands runs still going at the shutdown deadline back to the queue, unfailed, for another worker', async () => {
    const ns = uniqueNamespace('handback');
    const base = `{sluice:${ns}}:`;
    const first: HangMode = { hang: true, ledger: new Ledger() };
    const second: HangMode = { hang: false, ledger: new Ledger() };
    const producer = await open([], { namespace: ns, worker: { enabled: false } });
    const worker = await open([HangWorkflow, { provide: MODE, useValue: first }], {
      namespace: ns,
      worker: { concurrency: 5, shutdownTimeoutMs: 100 },
    });

    const handles = await producer.client.enqueueMany(
      HangWorkflow,
      Array.from({ length: 8 }, (_, i) => ({ input: { i } })),
    );
    await first.ledger.started(5); // every slot holds a hanging run
    await close(worker);

    const handedBack = new Set(first.ledger.executions.keys());
    expect(handedBack.size).toBe(5);
    for (const h of handles) {
      const info = await producer.client.get(h.id);
      expect(info).toMatchObject({ state: 'waiting', failures: 0, attempts: handedBack.has(h.id) ? 1 : 0 });
      expect(info?.error).toBeUndefined();
    }
    expect(await redis.scard(`${base}wf:gs.hang:active`)).toBe(0);
    expect(await redis.zcard(`${base}leases`)).toBe(0);
    expect((await producer.client.stats({ workflow: HangWorkflow })).workflows['gs.hang'].waiting).toBe(8);

    await open([HangWorkflow, { provide: MODE, useValue: second }], { namespace: ns, worker: { concurrency: 5 } });
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 15_000 })));
    expect(results).toEqual(handles.map((h, i) => ({ i, attempt: handedBack.has(h.id) ? 2 : 1 })));
    expect(second.ledger.executions.size).toBe(8);
    for (const h of handles) {
      expect(await producer.client.get(h.id)).toMatchObject({ state: 'completed', failures: 0, attempts: handedBack.has(h.id) ? 2 : 1 });
    }
  });
});
