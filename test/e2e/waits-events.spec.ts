import type Redis from 'ioredis';
import { RunContext, RunInfo, Workflow } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Gates, pollUntil } from '../support/workflows';

/**
 * Events (QueueClient.sendEvent, ctx.waitForEvent): one call resumes every run waiting on the
 * name and key — a thousand of them, across batches — and no other; a wait's timeout; an event
 * sent before a run waits is not stored.
 */
const holds = new Gates();

@Workflow('we.payment', { attempts: 1, indexCompleted: true })
class Payment {
  async run(input: { key?: string; name?: string; timeoutMs?: number; hold?: string }, ctx: RunContext) {
    if (input.hold) await holds.get(input.hold).promise;
    const opts = {
      ...(input.key !== undefined && { key: input.key }),
      ...(input.timeoutMs !== undefined && { timeoutMs: input.timeoutMs }),
    };
    const out = await ctx.waitForEvent<{ amount: number }>(input.name ?? 'paid', opts);
    return out.timedOut ? 'timeout' : out.payload === undefined ? '<undefined>' : out.payload;
  }
}

/** Another workflow waiting on the same event: sendEvent is per name and key, across workflows. */
@Workflow('we.ledger', { attempts: 1 })
class Ledger {
  async run(input: { key: string }, ctx: RunContext) {
    const out = await ctx.waitForEvent<{ amount: number }>('paid', { key: input.key });
    return out.timedOut ? 'timeout' : { ledger: out.payload };
  }
}

describe('durable waits: events', () => {
  const ns = uniqueNamespace('wev');
  const base = `{sluice:${ns}}:`;
  let redis: Redis;
  let worker: TestApp;
  let producer: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Payment, Ledger], { namespace: ns, worker: { concurrency: 64 } });
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
  });
  afterAll(async () => {
    holds.openAll();
    await worker.close();
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const waitingEvent = (wf: string) => producer.client.stats({ workflow: wf }).then((s) => s.workflows[wf]?.waitingEvent ?? 0);
  const stateOf = async (id: string) => (await producer.client.get(id))?.state;

  it('fans out to 1,000 runs waiting on one key, and to none waiting on another', async () => {
    const many = await producer.client.enqueueMany(
      'we.payment',
      Array.from({ length: 1000 }, () => ({ input: { key: 'k1' } })),
    );
    const others = await producer.client.enqueueMany(
      'we.payment',
      Array.from({ length: 5 }, () => ({ input: { key: 'k2' } })),
    );
    await pollUntil(
      () => waitingEvent('we.payment'),
      (n) => n === 1005,
      '1,005 runs waiting for the event',
      20_000,
    );
    expect(await redis.scard(`${base}event:paid|k1`)).toBe(1000);
    expect(await redis.scard(`${base}event:paid|k2`)).toBe(5);

    expect(await producer.client.sendEvent('paid', { key: 'k1', payload: { amount: 9 } })).toBe(1000);
    expect(await redis.exists(`${base}event:paid|k1`)).toBe(0);
    const stats = await pollUntil(
      () => producer.client.stats({ workflow: 'we.payment' }),
      (s) => s.workflows['we.payment'].completed === 1000,
      '1,000 runs completed',
      20_000,
    );
    expect(stats.workflows['we.payment']).toEqual(
      expect.objectContaining({ waitingEvent: 5, delayed: 0, waiting: 0, active: 0, failed: 0 }),
    );

    // Every one of them got the payload (paged through the completed index).
    const results = new Map<string, unknown>();
    let cursor: string | null | undefined;
    do {
      const page = await producer.client.listRuns({ workflow: 'we.payment', state: 'completed', limit: 400, ...(cursor && { cursor }) });
      for (const run of page.runs) results.set(run.id, run.result);
      cursor = page.cursor;
    } while (cursor);
    expect(results.size).toBe(1000);
    for (const handle of many) expect(results.get(handle.id)).toEqual({ amount: 9 });
    // Each resumed once: one suspend, two claims.
    const sample = (await Promise.all(many.slice(0, 20).map((h) => producer.client.get(h.id)))) as RunInfo[];
    expect(sample.map((r) => r.attempts)).toEqual(Array(20).fill(2));

    // The other key's runs were not visited: still waiting, still indexed.
    for (const handle of others) expect(await stateOf(handle.id)).toBe('waiting-event');
    expect(await redis.scard(`${base}event:paid|k2`)).toBe(5);
    // Sending k1 again finds nobody.
    expect(await producer.client.sendEvent('paid', { key: 'k1', payload: { amount: 1 } })).toBe(0);
    expect(await producer.client.sendEvent('paid', { key: 'k2' })).toBe(5);
    expect(await Promise.all(others.map((h) => h.result({ timeoutMs: 10_000 })))).toEqual(Array(5).fill('<undefined>'));
  });

  it('names, keys and the default key are separate; one event resumes runs of every workflow waiting on it', async () => {
    const keyless = await producer.client.enqueue('we.payment', {});
    const refund = await producer.client.enqueue('we.payment', { name: 'refunded', key: 'o1' });
    const paid = await producer.client.enqueue('we.payment', { key: 'o1' });
    const ledger = await producer.client.enqueue('we.ledger', { key: 'o1' });
    await pollUntil(
      async () => (await waitingEvent('we.payment')) + (await waitingEvent('we.ledger')),
      (n) => n === 4,
      'four runs waiting',
    );
    expect((await producer.client.get(keyless.id))?.waitingFor).toEqual({ kind: 'event', step: 'event:paid', name: 'paid', key: '' });

    expect(await producer.client.sendEvent('paid', { key: 'o1', payload: { amount: 3 } })).toBe(2);
    expect(await paid.result({ timeoutMs: 10_000 })).toEqual({ amount: 3 });
    expect(await ledger.result({ timeoutMs: 10_000 })).toEqual({ ledger: { amount: 3 } });
    expect(await stateOf(keyless.id)).toBe('waiting-event');
    expect(await stateOf(refund.id)).toBe('waiting-event');

    // An empty key is the default key.
    expect(await producer.client.sendEvent('paid', { key: '', payload: { amount: 4 } })).toBe(1);
    expect(await keyless.result({ timeoutMs: 10_000 })).toEqual({ amount: 4 });
    expect(await stateOf(refund.id)).toBe('waiting-event');
    expect(await producer.client.sendEvent('refunded', { key: 'o1', payload: { amount: -3 } })).toBe(1);
    expect(await refund.result({ timeoutMs: 10_000 })).toEqual({ amount: -3 });
  });

  it('an event wait times out with { timedOut: true } and leaves the event index', async () => {
    const run = await producer.client.enqueue('we.payment', { key: 'late', timeoutMs: 200 });
    await pollUntil(
      () => stateOf(run.id),
      (s) => s === 'waiting-event',
      'waiting for the event',
    );
    const info = await producer.client.get(run.id);
    expect(info?.waitingFor).toEqual({ kind: 'event', step: 'event:paid', name: 'paid', key: 'late', until: expect.any(Date) });
    expect(await redis.sismember(`${base}event:paid|late`, run.id)).toBe(1);
    expect(await run.result({ timeoutMs: 10_000 })).toBe('timeout');
    expect(await redis.exists(`${base}event:paid|late`)).toBe(0);
    expect(await producer.client.sendEvent('paid', { key: 'late' })).toBe(0);
    expect((await producer.client.get(run.id))?.state).toBe('completed');
  });

  it('an event sent before the run waits is not stored: the run waits for the next one', async () => {
    const run = await producer.client.enqueue('we.payment', { key: 'early', hold: 'early' });
    await pollUntil(
      () => stateOf(run.id),
      (s) => s === 'active',
      'the run started',
    );
    expect(await producer.client.sendEvent('paid', { key: 'early', payload: { amount: 1 } })).toBe(0);
    holds.open('early');
    await pollUntil(
      () => stateOf(run.id),
      (s) => s === 'waiting-event',
      'waiting for the event',
    );
    // Still waiting a while later: the first event is gone.
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await stateOf(run.id)).toBe('waiting-event');
    expect(await producer.client.sendEvent('paid', { key: 'early', payload: { amount: 2 } })).toBe(1);
    expect(await run.result({ timeoutMs: 10_000 })).toEqual({ amount: 2 });
  });

  it('a cancelled event waiter leaves the index: a later event does not count it', async () => {
    const run = await producer.client.enqueue('we.payment', { key: 'gone' });
    await pollUntil(
      () => stateOf(run.id),
      (s) => s === 'waiting-event',
      'waiting for the event',
    );
    expect(await producer.client.cancel(run.id)).toEqual({ cancelled: true, state: 'waiting-event', children: 0 });
    expect(await redis.exists(`${base}event:paid|gone`)).toBe(0);
    expect(await producer.client.sendEvent('paid', { key: 'gone' })).toBe(0);
    expect(await stateOf(run.id)).toBe('cancelled');
  });

  it('the namespace is consistent at rest', async () => {
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });
});
