import type Redis from 'ioredis';
import { RunContext, StepMemoLimitError, Workflow, WorkflowFailedError } from '../../lib';
import { SluiceTesting } from '../../lib/testing';
import { decodePayload } from '../../lib/redis/payload.codec';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { BILLING, FakeBilling, ParityOrderWorkflow } from '../support/order.workflow';

/** The step memo of a run as stored in Redis (`step:<key>` fields of its hash), decoded. */
async function storedMemo(redis: Redis, namespace: string, runId: string): Promise<Record<string, unknown>> {
  const fields = await redis.hgetall(`{sluice:${namespace}}:run:${runId}`);
  const memo: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(fields))
    if (field.startsWith('step:') && !field.startsWith('step:@')) memo[field.slice('step:'.length)] = decodePayload(value);
  return memo;
}

describe('the testing harness and a real worker agree', () => {
  let t: TestApp;
  let redis: Redis;
  let namespace: string;
  const billing = new FakeBilling();

  beforeAll(async () => {
    namespace = uniqueNamespace('parity');
    t = await createApp([ParityOrderWorkflow, { provide: BILLING, useValue: billing }], { namespace });
    redis = rawRedis();
  });
  afterAll(async () => {
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('gives the same result and the same step results (Dates and undefined kept) as production', async () => {
    const production = await t.client.run(ParityOrderWorkflow, { orderId: 'p-1' }, { id: 'parity-p-1', timeoutMs: 10_000 });
    const harness = SluiceTesting.harness(t.app.get(ParityOrderWorkflow));
    const local = await harness.run({ orderId: 'p-1' }, { id: 'parity-p-1' });

    expect(local.state).toBe('completed');
    expect(local.result).toEqual(production);
    expect(production.charge.at).toBeInstanceOf(Date);
    expect((production.audit as { seenAs: string }).seenAs).toBe('object');
    expect('receiptUrl' in production.charge).toBe(true);
    expect(local.memo).toEqual(await storedMemo(redis, namespace, 'parity-p-1'));
    expect(Object.keys(local.memo).sort()).toEqual(['audit#1', 'charge#1', 'createInvoice#1']);
  });

  it('a retry replays the same steps in both, and leaves the same memo', async () => {
    billing.failNextCharges = 1;
    const before = { invoices: billing.invoices, charges: billing.charges };
    const production = await t.client.run(ParityOrderWorkflow, { orderId: 'p-2' }, { id: 'parity-p-2', timeoutMs: 10_000 });
    const info = await t.client.get('parity-p-2');
    expect(info).toMatchObject({ state: 'completed', attempts: 2, failures: 1 });
    expect({ invoices: billing.invoices - before.invoices, charges: billing.charges - before.charges }).toEqual({
      invoices: 1,
      charges: 1,
    });

    billing.failNextCharges = 1;
    const local = await SluiceTesting.harness(t.app.get(ParityOrderWorkflow)).run({ orderId: 'p-2' });
    expect(local.attempts.map((a) => [a.outcome, a.executed, a.replayed])).toEqual([
      ['retry', ['createInvoice#1'], []],
      ['completed', ['charge#1', 'audit#1'], ['createInvoice#1']],
    ]);
    expect(local.result).toEqual(production);
    expect(local.memo).toEqual(await storedMemo(redis, namespace, 'parity-p-2'));
  });

  it('a NonRetryableError fails both on the first attempt with the same cause', async () => {
    const production = await t.client
      .run(ParityOrderWorkflow, { orderId: 'bad-p' }, { timeoutMs: 10_000 })
      .catch((error: unknown) => error);
    const local = await SluiceTesting.harness(t.app.get(ParityOrderWorkflow)).run({ orderId: 'bad-p' });

    expect(production).toBeInstanceOf(WorkflowFailedError);
    expect(local.failure).toMatchObject({
      causeName: (production as WorkflowFailedError).causeName,
      causeMessage: (production as WorkflowFailedError).causeMessage,
    });
    expect(local.attempts).toHaveLength(1);
  });
});

/** A small memo budget, so that a loop of sleeps runs into it within a few hundred iterations. */
const PARITY_BUDGET = 2048;

@Workflow('parity.sleeps', { attempts: 3 })
class ParitySleeps {
  async run(input: { n: number }, ctx: RunContext) {
    for (let i = 0; i < input.n; i++) await ctx.sleep('tick', 1);
    return input.n;
  }
}

@Workflow('parity.poller', { attempts: 2 })
class ParityPoller {
  async run(input: { i: number; total: number }, ctx: RunContext<{ i: number; total: number }>) {
    const got = await ctx.step('poll', () => ({ value: input.i * 2 }));
    await ctx.sleep('nap', 1);
    if (input.i < 20) return ctx.continueAsNew({ i: input.i + 1, total: input.total + got.value });
    return { total: input.total + got.value };
  }
}

describe('the testing harness and a real worker agree on durable waits and the memo budget', () => {
  let t: TestApp;
  let redis: Redis;
  let namespace: string;

  beforeAll(async () => {
    namespace = uniqueNamespace('parity-memo');
    t = await createApp([ParitySleeps, ParityPoller], { namespace, maxRunMemoBytes: PARITY_BUDGET });
    redis = rawRedis();
  });
  afterAll(async () => {
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('sleeps in a loop fail both at the same sleep with the same StepMemoLimitError', async () => {
    const production = await t.client
      .run(ParitySleeps, { n: 300 }, { id: 'parity-sleeps', timeoutMs: 60_000 })
      .catch((error: unknown) => error);
    const local = await SluiceTesting.harness(new ParitySleeps(), { maxRunMemoBytes: PARITY_BUDGET }).run({ n: 300 });

    expect(production).toBeInstanceOf(WorkflowFailedError);
    expect((production as WorkflowFailedError).causeName).toBe('StepMemoLimitError');
    expect(local.state).toBe('failed');
    expect(local.error).toBeInstanceOf(StepMemoLimitError);
    expect(local.failure?.causeMessage).toBe((production as WorkflowFailedError).causeMessage.replace('parity-sleeps', local.runId));
    expect(local.memo).toEqual(await storedMemo(redis, namespace, 'parity-sleeps'));
  }, 90_000);

  it('ctx.continueAsNew: the same result, incarnations and last memo in both', async () => {
    const production = await t.client.run(ParityPoller, { i: 0, total: 0 }, { id: 'parity-poller', timeoutMs: 30_000 });
    const local = await SluiceTesting.harness(new ParityPoller(), { maxRunMemoBytes: PARITY_BUDGET }).run({ i: 0, total: 0 });

    expect(production).toEqual({ total: 420 });
    expect(local.state).toBe('completed');
    expect(local.result).toEqual(production);
    expect(local.continued).toBe(20);
    expect(await redis.hget(`{sluice:${namespace}}:run:parity-poller`, 'gen')).toBe('20');
    expect(local.memo).toEqual(await storedMemo(redis, namespace, 'parity-poller'));
  });
});
