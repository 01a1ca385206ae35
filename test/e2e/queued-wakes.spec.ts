import type Redis from 'ioredis';
import { QueueModuleOptions, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { MAX_BLOCK_MS } from '../../lib/worker/wake.listener';
import { Gates } from '../support/workflows';

/**
 * A lone enqueue wakes a worker only when its run is the first in its lane's list: a run queued
 * behind others is served by the marker the first one left, or by the worker that took that
 * marker, which claims it too or passes the marker on when its batch is full (lua/includes/enqueue.lua,
 * enqueuePlain; claimRuns in claim-pass.lua).
 */
const gates = new Gates(); // the test opens gates.get(key) to let a held run finish
const begun = new Gates(); // opened by a run when it starts executing

@Workflow('qw.hold')
class HoldWorkflow {
  async run(input: { key: string }) {
    begun.open(input.key);
    await gates.get(input.key).promise;
    return input.key;
  }
}

let redis: Redis;
let apps: TestApp[] = [];
const namespaces: string[] = [];

beforeAll(() => void (redis = rawRedis()));
afterEach(async () => {
  gates.openAll(); // nothing may hold a closing app's shutdown
  await Promise.all(apps.map((app) => app.close()));
  apps = [];
});
afterAll(async () => {
  for (const ns of namespaces) await dropNamespace(redis, ns);
  await redis.quit();
});

function space() {
  const ns = uniqueNamespace('qw');
  namespaces.push(ns);
  const start = async (options: Partial<QueueModuleOptions>) => {
    const app = await createApp([HoldWorkflow], { namespace: ns, ...options });
    apps.push(app);
    return app;
  };
  return { keys: new RedisKeys('sluice', ns), start };
}

describe('wakes of runs queued behind others', () => {
  it('only the first run of an empty lane leaves a wake marker', async () => {
    const s = space();
    const producer = await s.start({ worker: { enabled: false } });
    const wake = s.keys.wake('qw.hold');
    await producer.client.enqueue(HoldWorkflow, { key: 'first' });
    expect(await redis.lrange(wake, 0, -1)).toEqual(['1']);
    // As if a worker had taken the marker and its claim were still on its way.
    await redis.del(wake);
    await producer.client.enqueue(HoldWorkflow, { key: 'second' });
    expect(await redis.llen(s.keys.workflow('qw.hold', 'queue'))).toBe(2);
    expect(await redis.exists(wake)).toBe(0);
    // Once the lane is empty again, the next run wakes a worker.
    await redis.del(s.keys.workflow('qw.hold', 'queue'));
    await producer.client.enqueue(HoldWorkflow, { key: 'third' });
    expect(await redis.lrange(wake, 0, -1)).toEqual(['1']);
  });

  it('a run queued behind one a worker is about to claim still reaches an idle worker at once', async () => {
    const s = space();
    // Two workers of one slot each, both blocked on the wake list; no fast path, so both runs are queued.
    await s.start({ worker: { concurrency: 1 } });
    await s.start({ worker: { concurrency: 1 } });
    const producer = await s.start({ worker: { enabled: false }, fastPath: false });
    // In one write: the first run's marker wakes a worker, whose claim comes after the second
    // run's enqueue, which finds the lane's list not empty and leaves no marker of its own.
    const [first, second] = await Promise.all([
      producer.client.enqueue(HoldWorkflow, { key: 'a' }),
      producer.client.enqueue(HoldWorkflow, { key: 'b' }),
    ]);
    // Both run at once, one on each worker: the first worker's claim, its one slot full with runs
    // still due, passed the marker on. Neither finishes before both began, and the second begins
    // well before the idle worker's block would time out and its reserve find the run anyway.
    let timer: NodeJS.Timeout | undefined;
    const blockTimedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('the second run waited for a block timeout: no worker was woken')), MAX_BLOCK_MS / 2);
    });
    await Promise.race([Promise.all([begun.get('a').promise, begun.get('b').promise]), blockTimedOut]).finally(() => clearTimeout(timer));
    gates.open('a');
    gates.open('b');
    expect(await first.result({ timeoutMs: 10_000 })).toBe('a');
    expect(await second.result({ timeoutMs: 10_000 })).toBe('b');
  });
});
