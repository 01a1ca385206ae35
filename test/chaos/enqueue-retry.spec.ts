import { Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { uniqueNamespace } from '../support/app';
import { appOn, proxiedServer } from '../support/fault';
import { dueInLane } from '../support/queue-state';
import { RedisAdmin, sluiceConnectionName } from '../support/redis-process';
import { pollUntil } from '../support/workflows';

/**
 * The first try of an enqueue of generated ids skips the look for an existing run (no run can
 * have a fresh id, and the look is a command of its own). A try sent again must look: the lost
 * one may have stored the runs. Here the producer's command connection reaches Redis through a
 * TCP proxy that holds its replies back: the enqueue runs, its reply never arrives, the
 * connection is killed, and the call goes out again on the next one.
 */
jest.setTimeout(60_000);

@Workflow('retry.plain')
class PlainWorkflow {
  async run(input: { key: string }): Promise<string> {
    return input.key;
  }
}

describe('an enqueue of generated ids whose reply was lost', () => {
  const redis = proxiedServer();

  it('is sent again, finds the runs its first try stored, and queues each once', async () => {
    const namespace = uniqueNamespace('enq-retry');
    const keys = new RedisKeys('sluice', namespace);
    const producer = await appOn(redis.proxy.url, [PlainWorkflow], { namespace, worker: { enabled: false } });
    const admin = new RedisAdmin(redis.raw);
    const lose = async <T>(enqueue: () => Promise<T>, queuedAfter: number): Promise<T> => {
      const command = (await admin.clients({ namePrefix: sluiceConnectionName(namespace, 'command') })).map((c) => c.addr);
      expect(redis.proxy.holdReplies((c) => command.includes(c.upstreamAddress ?? ''))).toBe(1);
      const result = enqueue();
      await pollUntil(
        () => dueInLane(redis.raw, keys, 'retry.plain'),
        (queued) => queued === queuedAfter,
        'the first try to run',
      );
      expect(await admin.killClients({ namePrefix: sluiceConnectionName(namespace, 'command') })).toHaveLength(1);
      return result;
    };
    try {
      await producer.client.enqueue(PlainWorkflow, { key: 'warm' }); // the command connection is open
      const one = await lose(() => producer.client.enqueue(PlainWorkflow, { key: 'one' }), 2);
      expect(one.created).toBe(true);
      const many = await lose(
        () => producer.client.enqueueMany(PlainWorkflow, [{ input: { key: 'two' } }, { input: { key: 'three' } }]),
        4,
      );
      expect(many.map((handle) => handle.created)).toEqual([true, true]);
      // Without the look, the second try would have queued each run again.
      expect(await dueInLane(redis.raw, keys, 'retry.plain')).toBe(4);
      expect(await producer.client.get(many[1].id)).toMatchObject({ state: 'waiting', input: { key: 'three' } });
    } finally {
      await producer.close();
    }
  });
});
