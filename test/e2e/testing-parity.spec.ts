import type Redis from 'ioredis';
import { WorkflowFailedError } from '../../lib';
import { SluiceTesting } from '../../lib/testing';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { BILLING, FakeBilling, ParityOrderWorkflow } from '../support/order.workflow';

/** The step memo of a run as stored in Redis (`step:<key>` fields of its hash), decoded. */
async function storedMemo(redis: Redis, namespace: string, runId: string): Promise<Record<string, unknown>> {
  const fields = await redis.hgetall(`{sluice:${namespace}}:run:${runId}`);
  const memo: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(fields)) if (field.startsWith('step:') && !field.startsWith('step:@')) memo[field.slice('step:'.length)] = JSON.parse(value);
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

  it('gives the same result and the same step results (Date → string, undefined dropped) as production', async () => {
    const production = await t.client.run(ParityOrderWorkflow, { orderId: 'p-1' }, { id: 'parity-p-1', timeoutMs: 10_000 });
    const harness = SluiceTesting.harness(t.app.get(ParityOrderWorkflow));
    const local = await harness.run({ orderId: 'p-1' }, { id: 'parity-p-1' });

    expect(local.state).toBe('completed');
    expect(local.result).toEqual(production);
    expect(typeof production.charge.at).toBe('string'); // typed Date by run's own signature; a string in fact
    expect((production.audit as { seenAs: string }).seenAs).toBe('string');
    expect('receiptUrl' in production.charge).toBe(false);
    expect(local.memo).toEqual(await storedMemo(redis, namespace, 'parity-p-1'));
    expect(Object.keys(local.memo).sort()).toEqual(['audit#1', 'charge#1', 'createInvoice#1']);
  });

  it('a retry replays the same steps in both, and leaves the same memo', async () => {
    billing.failNextCharges = 1;
    const before = { invoices: billing.invoices, charges: billing.charges };
    const production = await t.client.run(ParityOrderWorkflow, { orderId: 'p-2' }, { id: 'parity-p-2', timeoutMs: 10_000 });
    const info = await t.client.get('parity-p-2');
    expect(info).toMatchObject({ state: 'completed', attempts: 2, failures: 1 });
    expect({ invoices: billing.invoices - before.invoices, charges: billing.charges - before.charges }).toEqual({ invoices: 1, charges: 1 });

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
    const production = await t.client.run(ParityOrderWorkflow, { orderId: 'bad-p' }, { timeoutMs: 10_000 }).catch((error: unknown) => error);
    const local = await SluiceTesting.harness(t.app.get(ParityOrderWorkflow)).run({ orderId: 'bad-p' });

    expect(production).toBeInstanceOf(WorkflowFailedError);
    expect(local.failure).toMatchObject({
      causeName: (production as WorkflowFailedError).causeName,
      causeMessage: (production as WorkflowFailedError).causeMessage,
    });
    expect(local.attempts).toHaveLength(1);
  });
});
