import type Redis from 'ioredis';
import { defineWorkflow, RedisUnavailableError, RunContext, UnknownWorkflowError, Workflow } from '../../lib';
import { RedisConnections } from '../../lib/redis/redis.connections';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { namespaceKeys } from '../support/workflows';

// What a producer imports: the contract, not the worker's class (nor its dependencies).
interface QuoteInput {
  sku: string;
  quantity: number;
}
interface QuoteResult {
  sku: string;
  total: number;
  pricedAt: string;
}
const PriceQuote = defineWorkflow<QuoteInput, QuoteResult>('contracts.quote', { attempts: 4 });
const NeverRegistered = defineWorkflow<{ x: number }, number>('contracts.never');

// The worker's side: the class implements the contract; its run is type-checked against it.
@Workflow(PriceQuote)
class PriceQuoteWorkflow {
  async run(input: QuoteInput, ctx: RunContext): Promise<QuoteResult> {
    const unit = await ctx.step('unit-price', () => 250);
    return { sku: input.sku, total: unit * input.quantity, pricedAt: new Date(Date.UTC(2026, 0, 1)).toISOString() };
  }
}

/** A workflow the producer only knows by its name. */
@Workflow('contracts.echo')
class EchoWorkflow {
  async run(input: { text: string }, ctx: RunContext): Promise<{ echoed: string; attempt: number }> {
    return { echoed: input.text, attempt: ctx.attempt };
  }
}

@Workflow('contracts.late')
class LateWorkflow {
  async run(): Promise<string> {
    return 'late';
  }
}

/** Spies on SISMEMBER over an app's command connection: the fleet lookup's only command. */
function lookups(app: TestApp): jest.SpyInstance {
  return jest.spyOn(app.app.get(RedisConnections).command.client, 'sismember');
}

describe('producers without the workflow code: contracts and names registered by the fleet', () => {
  let worker: TestApp;
  let producer: TestApp;
  let redis: Redis;
  let namespace: string;
  const extra: TestApp[] = [];

  beforeAll(async () => {
    namespace = uniqueNamespace('contracts');
    redis = rawRedis();
    worker = await createApp([PriceQuoteWorkflow, EchoWorkflow], { namespace });
    // No workflow classes at all, and no worker: it can only go by the contract or the name.
    producer = await createApp([], { namespace, worker: { enabled: false }, defaults: { attempts: 2 } });
  });
  afterAll(async () => {
    await Promise.all([producer?.close(), worker?.close(), ...extra.map((app) => app.close())]);
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('a producer-only app with no workflow classes enqueues and awaits a run by contract and by name', async () => {
    // By contract: input and output typed from the contract.
    const quote: QuoteResult = await producer.client.run(PriceQuote, { sku: 'A-1', quantity: 3 }, { timeoutMs: 10_000 });
    expect(quote).toEqual({ sku: 'A-1', total: 750, pricedAt: '2026-01-01T00:00:00.000Z' });

    const handle = await producer.client.enqueue(PriceQuote, { sku: 'B-2', quantity: 2 }, { id: 'quote-b-2' });
    expect(handle.created).toBe(true);
    expect((await handle.result({ timeoutMs: 10_000 })).total).toBe(500);

    const many = await producer.client.enqueueMany(PriceQuote, [
      { input: { sku: 'C', quantity: 1 } },
      { input: { sku: 'D', quantity: 4 } },
    ]);
    expect(await Promise.all(many.map((h) => h.result({ timeoutMs: 10_000 })))).toMatchObject([{ total: 250 }, { total: 1000 }]);

    // By name: registered in Redis by the worker's bootstrap.
    expect(await producer.client.run('contracts.echo', { text: 'hi' }, { timeoutMs: 10_000 })).toEqual({ echoed: 'hi', attempt: 1 });
    const byName = await producer.client.enqueue('contracts.echo', { text: 'again' }, { id: 'echo-again' });
    expect(await byName.result({ timeoutMs: 10_000 })).toEqual({ echoed: 'again', attempt: 1 });
  });

  it("runs take the contract's attempts, else the producer's module default", async () => {
    await producer.client.run(PriceQuote, { sku: 'E', quantity: 1 }, { id: 'attempts-contract', timeoutMs: 10_000 });
    await producer.client.run('contracts.echo', { text: 'x' }, { id: 'attempts-name', timeoutMs: 10_000 });
    expect((await producer.client.get('attempts-contract'))?.maxAttempts).toBe(4);
    expect((await producer.client.get('attempts-name'))?.maxAttempts).toBe(2);
    // The worker enqueuing the same contract locally uses its declaration (the contract's attempts).
    await worker.client.run(PriceQuote, { sku: 'F', quantity: 1 }, { id: 'attempts-worker', timeoutMs: 10_000 });
    expect((await worker.client.get('attempts-worker'))?.maxAttempts).toBe(4);
  });

  it('an unregistered name or contract fails with UnknownWorkflowError and writes nothing', async () => {
    const byName = await producer.client.enqueue('contracts.nope', {}, { id: 'nope-1' }).catch((error: unknown) => error);
    expect(byName).toBeInstanceOf(UnknownWorkflowError);
    expect((byName as Error).message).toMatch(
      /^workflow: unknown workflow "contracts\.nope" \(no @Workflow in this application declares it, and no worker has registered it on \{sluice:contracts-/,
    );
    await expect(producer.client.run(NeverRegistered, { x: 1 }, { id: 'nope-2' })).rejects.toBeInstanceOf(UnknownWorkflowError);
    await expect(producer.client.enqueueMany('contracts.nope', [{ input: 1, opts: { id: 'nope-3' } }])).rejects.toBeInstanceOf(
      UnknownWorkflowError,
    );
    await expect(producer.client.schedule('nope.hourly', NeverRegistered, { cron: '@hourly' })).rejects.toBeInstanceOf(
      UnknownWorkflowError,
    );
    await expect(producer.client.stats({ workflow: 'contracts.nope' })).rejects.toBeInstanceOf(UnknownWorkflowError);
    // (The worker's own keys come and go meanwhile, so look for what these calls would have written.)
    const keys = await namespaceKeys(redis, namespace);
    expect(keys.filter((key) => /run:nope-|contracts\.(nope|never)|schedule:nope/.test(key))).toEqual([]);
    expect(await redis.smembers(`{sluice:${namespace}}:workflows`)).toEqual(
      expect.not.arrayContaining(['contracts.nope', 'contracts.never']),
    );
  });

  it('checks bad input before asking Redis, and asks once per registered name', async () => {
    const spy = lookups(producer);
    try {
      // A name that cannot be a workflow name, and bad input for an unknown name: no Redis call.
      await expect(producer.client.enqueue('not a name', {})).rejects.toThrow(/workflow: "not a name" may only contain/);
      await expect(producer.client.enqueue('contracts.nope2', { f: () => 1 })).rejects.toThrow(/input\.f/);
      expect(spy).not.toHaveBeenCalled();

      // Earlier tests confirmed contracts.quote and contracts.echo: cached, no more lookups.
      await producer.client.run(PriceQuote, { sku: 'G', quantity: 1 }, { timeoutMs: 10_000 });
      await producer.client.enqueue('contracts.echo', { text: 'cached' });
      expect(spy).not.toHaveBeenCalled();

      // An unknown name is asked each time (a worker may register it later)...
      await expect(producer.client.enqueue('contracts.late', null)).rejects.toBeInstanceOf(UnknownWorkflowError);
      await expect(producer.client.enqueue('contracts.late', null)).rejects.toBeInstanceOf(UnknownWorkflowError);
      expect(spy).toHaveBeenCalledTimes(2);
      // ...so once a worker that runs it has booted, the same call goes through, and is then cached.
      extra.push(await createApp([LateWorkflow], { namespace }));
      expect(await producer.client.run('contracts.late', null, { timeoutMs: 10_000 })).toBe('late');
      await producer.client.enqueue('contracts.late', null);
      expect(spy).toHaveBeenCalledTimes(3);
    } finally {
      spy.mockRestore();
    }
  });

  it('keeps the one-round-trip enqueue for workflows the process declares', async () => {
    const spy = lookups(worker);
    try {
      await worker.client.run(PriceQuote, { sku: 'H', quantity: 1 }, { timeoutMs: 10_000 });
      await worker.client.run('contracts.echo', { text: 'local' }, { timeoutMs: 10_000 });
      await worker.client.run(EchoWorkflow, { text: 'class' }, { timeoutMs: 10_000 });
      expect(spy).not.toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  });

  it('a lookup Redis cannot answer rejects with RedisUnavailableError: the enqueue was not sent', async () => {
    const namespaceDown = uniqueNamespace('contracts-down');
    // Nothing listens on port 1: every call waits for the connection up to redisTimeoutMs.
    const down = await createApp([], {
      namespace: namespaceDown,
      connection: { url: 'redis://127.0.0.1:1' },
      worker: { enabled: false },
      redisTimeoutMs: 300,
      migrate: false,
    });
    extra.push(down);
    const error = await down.client.enqueue(PriceQuote, { sku: 'I', quantity: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect((error as RedisUnavailableError).operation).toBe('enqueue');
  });
});
