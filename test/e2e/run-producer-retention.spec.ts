import Redis from 'ioredis';
import { QueueClient, Workflow, WorkflowFailedError } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { rejection } from '../support/rejection';

/**
 * run() from a producer that does not have the workflow's class (it runs it by name, as the
 * docs/configuration.md's "Producers without the workflow's code" shows) cannot know the workflow's retention:
 * with `keep: { completed: 0 }` the commit that publishes the outcome also deletes the record,
 * so the producer must be subscribed before its enqueue lands, or the outcome is gone.
 */
@Workflow('prr.none', { keep: { completed: 0, failed: 0 }, attempts: 1 })
class KeepNothingWorkflow {
  async run(input: { n: number; fail?: boolean }): Promise<number> {
    if (input.fail) throw new Error(`run ${input.n} fails`);
    return input.n + 1;
  }
}

describe('run() from a producer without the workflow, against a worker that keeps nothing', () => {
  let redis: Redis;
  let worker: TestApp;
  let producer: TestApp;
  let namespace: string;
  let keys: RedisKeys;

  beforeAll(async () => {
    redis = rawRedis();
    namespace = uniqueNamespace('prr');
    keys = new RedisKeys('sluice', namespace);
    worker = await createApp([KeepNothingWorkflow], { namespace, worker: { concurrency: 50 } });
    producer = await createApp([], { namespace, worker: { enabled: false } });
  });
  afterAll(async () => {
    await producer?.close();
    await worker?.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  /** One call from each of `count` producer apps opened for it, one after the other. */
  async function eachFresh<T>(count: number, call: (client: QueueClient, n: number) => Promise<T>): Promise<T[]> {
    const results: T[] = [];
    for (let n = 0; n < count; n++) {
      const fresh = await createApp([], { namespace, worker: { enabled: false } });
      try {
        results.push(await call(fresh.client, n));
      } finally {
        await fresh.close();
      }
    }
    return results;
  }

  it('keep { completed: 0 }: 30 calls by name, one after the other, all resolve with their results', async () => {
    const results: unknown[] = [];
    for (let n = 0; n < 30; n++)
      results.push(await producer.client.run('prr.none', { n }, { id: `seq-${n}` }).catch((error: Error) => error.name)); // the name, so every call is seen
    expect(results).toEqual(Array.from({ length: 30 }, (_, n) => n + 1));
    expect(await redis.exists(keys.run('seq-0'), keys.run('seq-29'))).toBe(0); // nothing kept, as declared
  });

  it('keep { completed: 0 }: the first call of each of 30 fresh producers (subscriber not connected yet) resolves with its result', async () => {
    const results = await eachFresh(30, (client, n) =>
      client.run('prr.none', { n }, { id: `fresh-${n}` }).catch((error: Error) => error.name),
    );
    expect(results).toEqual(Array.from({ length: 30 }, (_, n) => n + 1));
  });

  it('keep { completed: 0 }: 30 concurrent calls by name all resolve with their results', async () => {
    const results = await Promise.all(Array.from({ length: 30 }, (_, n) => producer.client.run('prr.none', { n }, { id: `par-${n}` })));
    expect(results).toEqual(Array.from({ length: 30 }, (_, n) => n + 1));
  });

  it('keep { failed: 0 }: a failing run by name rejects WorkflowFailedError with its error, not RunNotFoundError (30 fresh producers)', async () => {
    const errors = await eachFresh(30, (client, n) =>
      rejection(() => client.run('prr.none', { n, fail: true }, { id: `failing-${n}`, attempts: 1 })),
    );
    expect(errors.map((error) => (error as Error).name)).toEqual(Array(30).fill('WorkflowFailedError'));
    errors.forEach((error, n) => expect((error as WorkflowFailedError).message).toContain(`run ${n} fails`));
    expect(await redis.exists(keys.run('failing-0'), keys.run('failing-29'))).toBe(0);
  });
});
