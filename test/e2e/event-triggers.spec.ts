import type Redis from 'ioredis';
import { z } from 'zod';
import {
  EventIdConflictError,
  InputValidationError,
  InvalidNameError,
  InvalidOptionError,
  PayloadNotSerializableError,
  PayloadTooLargeError,
  PublishResult,
  RunContext,
  Workflow,
  WorkflowFailedError,
} from '../../lib';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { rejection } from '../support/rejection';
import { scanKeys } from '../support/scan';
import { commandsBefore, Counter, monitorCommands, pollUntil } from '../support/workflows';

/**
 * Event triggers (`@Workflow({ on, filter })`, `QueueClient.publish`): one event starts one run of
 * every subscribed workflow, idempotently by its id, whoever publishes it; subscriptions live in
 * Redis, written by the workers' bootstraps (the latest wins); publish also resumes
 * `ctx.waitForEvent` waits. Not to be confused with workflow-events.spec.ts (lifecycle hooks).
 */
const ran = new Counter();

@Workflow('et.invoice', { on: 'order.created', attempts: 2 })
class Invoice {
  async run(input: { orderId: string; amount: number }, ctx: RunContext) {
    ran.inc('et.invoice');
    return { invoice: input.orderId, runId: ctx.runId };
  }
}

@Workflow('et.email', { on: ['order.created', 'order.paid'] })
class Email {
  async run(input: { orderId: string }) {
    ran.inc('et.email');
    return `mail ${input.orderId}`;
  }
}

@Workflow('et.audit', { on: 'order.created', filter: (payload: { amount: number }) => payload.amount >= 100 })
class Audit {
  async run(input: { orderId: string; amount: number }) {
    ran.inc('et.audit');
    return { audited: input.amount };
  }
}

/** Waits for the order's shipment: resumed by a publish with the order id as key. */
@Workflow('et.shipping')
class Shipping {
  async run(input: { orderId: string }, ctx: RunContext) {
    const shipped = await ctx.waitForEvent<{ carrier: string }>('order.shipped', { key: input.orderId, timeoutMs: 60_000 });
    return shipped.timedOut ? 'timeout' : shipped.payload;
  }
}

const Refund = z.object({ orderId: z.string(), cents: z.number().int() });

@Workflow('et.refund', { on: 'refund.requested', input: Refund, attempts: 3 })
class RefundWorkflow {
  async run(input: z.infer<typeof Refund>) {
    return input.cents;
  }
}

describe('event triggers', () => {
  const ns = uniqueNamespace('etr');
  const base = `{sluice:${ns}}:`;
  let redis: Redis;
  let worker: TestApp;
  /** Two producer-only apps without any workflow class. */
  let producers: TestApp[];

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Invoice, Email, Audit, Shipping, RefundWorkflow], { namespace: ns, worker: { concurrency: 16 } });
    producers = await Promise.all([0, 1].map(() => createApp([], { namespace: ns, worker: { enabled: false } })));
  });
  afterAll(async () => {
    await Promise.all([worker, ...producers].map((app) => app.close()));
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const runIds = (result: PublishResult) => result.runs.map((run) => run.id);

  it('one event id published concurrently by two producer-only apps starts exactly one run per subscriber', async () => {
    const before = { invoice: ran.get('et.invoice'), email: ran.get('et.email'), audit: ran.get('et.audit') };
    const payload = { orderId: 'o-1', amount: 250 };
    const calls = Array.from({ length: 20 }, (_, i) => producers[i % 2].client.publish('order.created', payload, { id: 'order-1' }));
    const results = await Promise.all(calls);

    const expected = ['evt:order-1:et.audit', 'evt:order-1:et.email', 'evt:order-1:et.invoice'];
    for (const result of results) {
      expect(result).toMatchObject({ id: 'order-1', name: 'order.created' });
      expect(runIds(result)).toEqual(expected);
    }
    expect(results.filter((r) => r.published)).toHaveLength(1);
    expect(results.flatMap((r) => r.runs).filter((run) => run.created)).toHaveLength(3);
    // Exactly three run records for the event in Redis.
    const keys = await scanKeys(redis, `${base}run:evt:order-1:*`);
    expect(keys.sort()).toEqual(expected.map((id) => `${base}run:${id}`));

    const published = results.find((r) => r.published)!;
    const outcomes = await Promise.all(published.runs.map((run) => run.result({ timeoutMs: 10_000 })));
    expect(outcomes).toEqual([{ audited: 250 }, 'mail o-1', { invoice: 'o-1', runId: 'evt:order-1:et.invoice' }]);
    expect(ran.get('et.invoice') - before.invoice).toBe(1);
    expect(ran.get('et.email') - before.email).toBe(1);
    expect(ran.get('et.audit') - before.audit).toBe(1);

    // Published again after the runs finished: still nothing new.
    const again = await producers[0].client.publish('order.created', payload, { id: 'order-1' });
    expect(again.published).toBe(false);
    expect(again.runs.map((run) => run.created)).toEqual([false, false, false]);
    expect(ran.get('et.invoice') - before.invoice).toBe(1);
  });

  it('stores where a run came from, with the workflow attempts the bootstrap declared', async () => {
    const result = await producers[1].client.publish('order.created', { orderId: 'o-2', amount: 5 });
    expect(result.id).toMatch(/^[A-Za-z0-9_-]{16}$/); // generated
    const invoice = result.runs.find((run) => run.workflow === 'et.invoice')!;
    await invoice.result({ timeoutMs: 10_000 });
    const info = await producers[0].client.get(invoice.id);
    expect(info).toMatchObject({
      workflow: 'et.invoice',
      state: 'completed',
      event: { name: 'order.created', id: result.id },
      maxAttempts: 2,
    });
    expect(await producers[0].client.getEvent(result.id)).toEqual({
      id: result.id,
      name: 'order.created',
      publishedAt: expect.any(Date),
      runs: result.runs.map((run) => ({ workflow: run.workflow, runId: run.id })),
    });
    const listed = await producers[0].client.listEvents({ name: 'order.created' });
    expect(listed.map((event) => event.id)).toEqual([result.id, 'order-1']);
    // A run enqueued directly carries no event.
    const direct = await worker.client.enqueue(Invoice, { orderId: 'd', amount: 1 });
    await direct.result({ timeoutMs: 10_000 });
    expect((await worker.client.get(direct.id))?.event).toBeUndefined();
  });

  it('an array `on` subscribes to each name; a name nobody subscribes to starts nothing', async () => {
    const paid = await producers[0].client.publish('order.paid', { orderId: 'o-3' });
    expect(paid.runs.map((run) => run.workflow)).toEqual(['et.email']);
    expect(await paid.runs[0].result({ timeoutMs: 10_000 })).toBe('mail o-3');
    const nobody = await producers[0].client.publish('order.unknown', { orderId: 'o-3' });
    expect(nobody).toMatchObject({ published: true, runs: [], resumed: 0 });
  });

  it('filter: a refused event ends the run completed without running it, visibly; direct enqueues are not filtered', async () => {
    const before = ran.get('et.audit');
    const small = await producers[0].client.publish('order.created', { orderId: 'o-4', amount: 20 }, { id: 'small-4' });
    const audit = small.runs.find((run) => run.workflow === 'et.audit')!;
    expect(await audit.result({ timeoutMs: 10_000 })).toBeUndefined();
    expect(await producers[0].client.get(audit.id)).toMatchObject({ state: 'completed', event: { name: 'order.created', id: 'small-4' } });
    const timeline = await producers[0].client.timeline(audit.id);
    expect(timeline?.attempts.at(-1)?.calls.map((call) => call.key)).toEqual(['event-filter#1']);
    expect(ran.get('et.audit')).toBe(before);
    // The other subscribers ran.
    expect(await small.runs.find((run) => run.workflow === 'et.email')!.result({ timeoutMs: 10_000 })).toBe('mail o-4');

    const direct = await worker.client.enqueue(Audit, { orderId: 'o-5', amount: 1 });
    expect(await direct.result({ timeoutMs: 10_000 })).toEqual({ audited: 1 });
    expect(ran.get('et.audit')).toBe(before + 1);
  });

  it('resumes the runs waiting in ctx.waitForEvent(name, { key }), once per event id', async () => {
    const waiting = await worker.client.enqueue(Shipping, { orderId: 'o-6' });
    const other = await worker.client.enqueue(Shipping, { orderId: 'o-7' });
    await pollUntil(
      () => producers[0].client.get(waiting.id),
      (run) => run?.state === 'waiting-event',
      'the run to wait',
    );
    await pollUntil(
      () => producers[0].client.get(other.id),
      (run) => run?.state === 'waiting-event',
      'the other run to wait',
    );

    const shipped = await producers[1].client.publish('order.shipped', { carrier: 'ups' }, { id: 'ship-6', key: 'o-6' });
    expect(shipped).toMatchObject({ published: true, runs: [], resumed: 1 });
    expect(await waiting.result({ timeoutMs: 10_000 })).toEqual({ carrier: 'ups' });
    // The same id again resumes nothing, not even a run that waits on that key now.
    const again = await worker.client.enqueue(Shipping, { orderId: 'o-6' }, { id: 'shipping-again' });
    await pollUntil(
      () => producers[0].client.get(again.id),
      (run) => run?.state === 'waiting-event',
      'the second run to wait',
    );
    expect(await producers[0].client.publish('order.shipped', { carrier: 'dhl' }, { id: 'ship-6', key: 'o-6' })).toMatchObject({
      published: false,
      resumed: 0,
    });
    expect((await producers[0].client.get(again.id))?.state).toBe('waiting-event');
    expect((await producers[0].client.get(other.id))?.state).toBe('waiting-event');
    // sendEvent stays the waits-only call: it resumes them, and starts nothing.
    expect(await producers[0].client.sendEvent('order.shipped', { key: 'o-6', payload: { carrier: 'fedex' } })).toBe(1);
    expect(await again.result({ timeoutMs: 10_000 })).toEqual({ carrier: 'fedex' });
    await producers[0].client.publish('order.shipped', { carrier: 'ups' }, { key: 'o-7' });
    expect(await other.result({ timeoutMs: 10_000 })).toEqual({ carrier: 'ups' });
  });

  it('an id published under another name is a conflict, and writes nothing', async () => {
    await producers[0].client.publish('order.paid', { orderId: 'o-8' }, { id: 'conflict-8' });
    const error = await rejection(() =>
      producers[1].client.publish('order.created', { orderId: 'o-8', amount: 500 }, { id: 'conflict-8' }),
    );
    expect(error).toBeInstanceOf(EventIdConflictError);
    expect((error as Error).message).toMatch(/"conflict-8" was published as "order.paid", not "order.created"/);
    expect(await redis.exists(`${base}run:evt:conflict-8:et.invoice`)).toBe(0);
  });

  it('input schema: a producer with the class refuses the payload before writing; the worker fails it without retries otherwise', async () => {
    const bad = { orderId: 'o-9', cents: 'ten' };
    const local = await rejection(() => worker.client.publish('refund.requested', bad, { id: 'refund-9' }));
    expect(local).toBeInstanceOf(InputValidationError);
    expect(await redis.exists(`${base}published:refund-9`)).toBe(0);

    const remote = await producers[0].client.publish('refund.requested', bad, { id: 'refund-9' });
    const failure = await rejection(() => remote.runs[0].result({ timeoutMs: 10_000 }));
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    const info = await producers[0].client.get(remote.runs[0].id);
    expect(info).toMatchObject({ state: 'failed', attempts: 1, error: { name: 'InputValidationError' } });

    const good = await producers[1].client.publish('refund.requested', { orderId: 'o-9', cents: 10 });
    expect(await good.runs[0].result({ timeoutMs: 10_000 })).toBe(10);
  });

  it('refuses bad input with a typed error before any Redis call', async () => {
    const client = producers[0].client;
    const cases: Array<[() => Promise<unknown>, new (...args: never[]) => Error, RegExp]> = [
      [() => client.publish('bad name', {}), InvalidNameError, /event name/],
      [() => client.publish('', {}), InvalidNameError, /event name/],
      [() => client.publish('e', {}, { id: 'x'.repeat(96) }), InvalidNameError, /opts\.id: must be at most 95/],
      [() => client.publish('e', {}, { id: 'a b' }), InvalidNameError, /opts.id/],
      [() => client.publish('e', {}, { key: 'a b' }), InvalidNameError, /opts.key/],
      [() => client.publish('e', {}, { ids: 'x' } as never), InvalidOptionError, /publish opts\.ids: .*did you mean `id`/],
      [() => client.publish('e', {}, 'x' as never), InvalidOptionError, /opts: must be an object/],
      [() => client.publish('e', { f: () => 1 }), PayloadNotSerializableError, /event payload/],
      [() => client.publish('e', { s: Symbol('s') }), PayloadNotSerializableError, /event payload/],
      [() => client.getEvent('a b'), InvalidNameError, /event id/],
      [() => client.listEvents({ name: 'e', limit: 0 }), InvalidOptionError, /opts.limit/],
      [() => client.listEvents({ name: 'e', limt: 1 } as never), InvalidOptionError, /did you mean `limit`/],
    ];
    const monitor = await monitorCommands(ns);
    try {
      for (const [call, type, message] of cases) {
        const error = await rejection(call);
        expect(error).toBeInstanceOf(type);
        expect((error as Error).message).toMatch(message);
      }
      const seen = await commandsBefore(monitor, redis, `${base}sentinel`);
      expect(seen.filter((args) => args.some((arg) => arg.includes(base)))).toEqual([]);
    } finally {
      await monitor.close();
    }
  });
});

describe('event triggers: payload limits', () => {
  const ns = uniqueNamespace('etl');
  let redis: Redis;
  let producer: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    producer = await createApp([], { namespace: ns, worker: { enabled: false }, maxPayloadBytes: 1024 });
  });
  afterAll(async () => {
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('a payload over maxPayloadBytes is refused before any write; one at the bound is published', async () => {
    const error = await rejection(() => producer.client.publish('big', { text: 'x'.repeat(1100) }, { id: 'big-1' }));
    expect(error).toBeInstanceOf(PayloadTooLargeError);
    expect(await redis.exists(`{sluice:${ns}}:published:big-1`)).toBe(0);
    const fits = await producer.client.publish('big', { text: 'x'.repeat(900) }, { id: 'big-2' });
    expect(fits.published).toBe(true);
  });
});

/** A redeploy: the latest bootstrap's `on` is what Redis holds. */
describe('event triggers: subscriptions follow the latest bootstrap', () => {
  const ns = uniqueNamespace('etd');
  let redis: Redis;
  let producer: TestApp;

  @Workflow('etd.report', { on: ['sale', 'refund'] })
  class ReportV1 {
    async run() {
      return 'v1';
    }
  }

  @Workflow('etd.report', { on: 'refund' })
  class ReportV2 {
    async run() {
      return 'v2';
    }
  }

  /** The code that drops `on` altogether and declares nothing else: its boot check must still unsubscribe. */
  @Workflow('etd.report')
  class ReportV3 {
    async run() {
      return 'v3';
    }
  }

  beforeAll(async () => {
    redis = rawRedis();
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
  });
  afterAll(async () => {
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const subscribers = async (event: string) => (await producer.client.publish(event, {})).runs.map((run) => run.workflow);

  it('a redeploy that changes or drops `on` unsubscribes; no stale fan-out', async () => {
    const v1 = await createApp([ReportV1], { namespace: ns });
    expect(await subscribers('sale')).toEqual(['etd.report']);
    expect(await subscribers('refund')).toEqual(['etd.report']);
    await v1.close();

    const v2 = await createApp([ReportV2], { namespace: ns });
    expect(await subscribers('sale')).toEqual([]);
    const refund = await producer.client.publish('refund', {});
    expect(await refund.runs[0].result({ timeoutMs: 10_000 })).toBe('v2');
    await v2.close();

    const v3 = await createApp([ReportV3], { namespace: ns });
    await pollUntil(
      () => subscribers('refund'),
      (list) => list.length === 0,
      'the unsubscription',
    );
    expect(await redis.exists(`{sluice:${ns}}:wf:etd.report:on`)).toBe(0);
    await v3.close();
  });
});
