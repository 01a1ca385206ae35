import { Inject } from '@nestjs/common';
import Redis from 'ioredis';
import { setTimeout as delay } from 'node:timers/promises';
import { RunContext, Workflow } from '../../lib';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';

const CAP = 3;
const RUNS = 240;
const APP_NAME = 'APP_NAME';

/** Both apps live in this jest process, so one counter sees every executing run of the fleet. */
const live = { now: 0, max: 0, byApp: new Map<string, number>(), runs: new Map<string, number>() };

/** Every 4th run throws on its first attempt (retried at once), see the test's comment. */
const flaky = (i: number) => i % 4 === 0;

@Workflow('fleet.capped', { concurrency: CAP, attempts: 2, backoff: { delayMs: 0 } })
class CappedWorkflow {
  constructor(@Inject(APP_NAME) private readonly app: string) {}

  async run(input: { i: number }, ctx: RunContext): Promise<number> {
    live.now++;
    live.max = Math.max(live.max, live.now);
    live.byApp.set(this.app, (live.byApp.get(this.app) ?? 0) + 1);
    live.runs.set(ctx.runId, (live.runs.get(ctx.runId) ?? 0) + 1);
    try {
      await delay(1 + Math.floor(Math.random() * 5)); // the work itself
      if (flaky(input.i) && ctx.attempt === 1) throw new Error('first attempt fails');
    } finally {
      live.now--;
    }
    return input.i;
  }
}

describe('workflow concurrency cap across two Nest apps', () => {
  const ns = uniqueNamespace('fleet');
  const activeKey = `{sluice:${ns}}:wf:fleet.capped:active`;
  let redis: Redis;
  let apps: TestApp[] = [];

  beforeAll(async () => {
    redis = rawRedis();
    for (const name of ['a', 'b']) {
      apps.push(await createApp([CappedWorkflow, { provide: APP_NAME, useValue: name }], { namespace: ns, worker: { concurrency: 10 } }));
    }
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    apps = [];
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  // A worker refills the slot of a completed run in its complete call, so while the backlog lasts
  // one app could keep every capped slot to itself. A failed attempt frees its slot without a
  // refill, so the flaky runs make both apps contend for (and hold) slots at the same time.
  it(`never has more than ${CAP} runs active, in process and in Redis, and reaches the cap`, async () => {
    expect(await redis.hget(`{sluice:${ns}}:limits`, 'wf:fleet.capped')).toBe(String(CAP));

    let sampling = true;
    const sampled = { max: 0, count: 0 };
    const sampler = (async () => {
      while (sampling) {
        sampled.max = Math.max(sampled.max, await redis.scard(activeKey));
        sampled.count++;
        await delay(2);
      }
    })();

    const [a, b] = apps;
    const handles = await a.client.enqueueMany(
      CappedWorkflow,
      Array.from({ length: RUNS }, (_, i) => ({ input: { i } })),
    );
    // Wait through both apps' clients: either can await any run.
    const results = await Promise.all(handles.map((h, i) => (i % 2 ? b : a).client.wait(h.id, { timeoutMs: 30_000 })));
    sampling = false;
    await sampler;

    expect(results).toEqual(handles.map((_, i) => i));
    expect(live.max).toBeLessThanOrEqual(CAP);
    expect(sampled.max).toBeLessThanOrEqual(CAP);
    // The cap was reached, so the assertions above could have caught a breach.
    expect(live.max).toBe(CAP);
    expect(sampled.max).toBe(CAP);
    expect(sampled.count).toBeGreaterThan(10);
    // Both apps took part, so the cap was held across processes' worth of workers, not by one.
    expect(live.byApp.get('a')).toBeGreaterThan(0);
    expect(live.byApp.get('b')).toBeGreaterThan(0);
    const attempts = handles.map((_, i) => (flaky(i) ? 2 : 1));
    expect(live.byApp.get('a')! + live.byApp.get('b')!).toBe(attempts.reduce((x, y) => x + y, 0));
    expect(handles.map((h) => live.runs.get(h.id))).toEqual(attempts);
    expect(live.now).toBe(0);
    expect(await redis.scard(activeKey)).toBe(0);
  });
});
