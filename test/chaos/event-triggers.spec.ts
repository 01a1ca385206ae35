import type Redis from 'ioredis';
import { Workflow } from '../../lib';
import { createApp, dropNamespace, rawRedis, redisUrl, TestApp, uniqueNamespace } from '../support/app';
import { scanKeys } from '../support/scan';
import { Counter, pollUntil } from '../support/workflows';
import { ChildWorker } from './child-worker';

/**
 * One event id published at once by two producer processes (forked, producer-only: no workflow
 * class, so they know the subscribers from Redis alone), many calls each: exactly one run per
 * subscribed workflow, every call answering the same runs, each run executed once.
 */
const ran = new Counter();

@Workflow('ec.invoice', { on: 'order.placed' })
class Invoice {
  async run() {
    ran.inc('ec.invoice');
    return 'invoice';
  }
}

@Workflow('ec.email', { on: ['order.placed', 'order.paid'] })
class Email {
  async run() {
    ran.inc('ec.email');
    return 'email';
  }
}

@Workflow('ec.stock', { on: 'order.placed' })
class Stock {
  async run() {
    ran.inc('ec.stock');
    return 'stock';
  }
}

interface Published {
  published: boolean;
  runs: Array<{ workflow: string; id: string; created: boolean }>;
}

describe('event triggers across producer processes', () => {
  const ns = uniqueNamespace('ecp');
  let redis: Redis;
  let worker: TestApp;
  const children: ChildWorker[] = [];

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Invoice, Email, Stock], { namespace: ns });
  });
  afterAll(async () => {
    await Promise.all(children.map((child) => child.kill()));
    await worker.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('starts exactly three runs for one event id published concurrently by two producer-only processes', async () => {
    const env = { REDIS_URL: redisUrl(), NS: ns, EVENT: 'order.placed', EVENT_ID: 'order-42', CALLS: '25' };
    const script = `${__dirname}/publisher.process.ts`;
    children.push(new ChildWorker(env, script), new ChildWorker(env, script));
    await Promise.all(children.map((child) => child.waitFor((m) => m.ready === true, 'ready', 90_000)));
    children.forEach((child) => child.send('go'));
    const replies = await Promise.all(children.map((child) => child.waitFor((m) => 'published' in m || 'error' in m, 'its publishes')));
    expect(replies.filter((m) => 'error' in m)).toEqual([]);
    const results = replies.flatMap((m) => m.published as Published[]);
    expect(results).toHaveLength(50);

    const expected = ['ec.email', 'ec.invoice', 'ec.stock'].map((wf) => ({ workflow: wf, id: `evt:order-42:${wf}` }));
    for (const result of results) expect(result.runs.map(({ workflow, id }) => ({ workflow, id }))).toEqual(expected);
    expect(results.filter((r) => r.published)).toHaveLength(1);
    expect(results.flatMap((r) => r.runs).filter((run) => run.created)).toHaveLength(3);
    expect((await scanKeys(redis, `{sluice:${ns}}:run:evt:order-42:*`)).sort()).toEqual(
      expected.map(({ id }) => `{sluice:${ns}}:run:${id}`),
    );

    for (const { id } of expected) expect(await worker.client.wait(id, { timeoutMs: 10_000 })).toBeDefined();
    expect([ran.get('ec.email'), ran.get('ec.invoice'), ran.get('ec.stock')]).toEqual([1, 1, 1]);
    const stats = await pollUntil(
      () => worker.client.stats(),
      (s) => ['ec.email', 'ec.invoice', 'ec.stock'].every((wf) => s.workflows[wf]?.completed === 1),
      'every run counted completed once',
    );
    expect(Object.values(stats.workflows).reduce((sum, wf) => sum + wf.completed, 0)).toBe(3);

    await Promise.all(children.map((child) => child.stop()));
  });
});
