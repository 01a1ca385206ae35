import type Redis from 'ioredis';
import { RunContext, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { firstToken, createdAtOf, waitParked } from '../support/queue-state';
import { Gates, type MonitoredCommand, monitorCommands, pollUntil } from '../support/workflows';

/**
 * Fast-path handoffs on a worker's handoff channel (lua/includes/enqueue.lua deliverHandoff): an
 * enqueue that finds a worker parked publishes the claimed run to it, so the worker's blocking
 * read stays under way (no read sent again per run: see also run-inbox.spec.ts's command count).
 * Older workers' announcements, which name no channel, get the wake list (fast-path.spec.ts).
 */
const gates = new Gates();
const begun = new Gates();

@Workflow('hc.hold')
class HoldWorkflow {
  async run(input: { key: string; hold?: boolean }, ctx: RunContext) {
    begun.open(input.key);
    if (input.hold) await gates.get(input.key).promise;
    return { key: input.key, attempt: ctx.attempt };
  }
}

let redis: Redis;
let apps: TestApp[] = [];
const namespaces: string[] = [];

beforeAll(() => void (redis = rawRedis()));
afterEach(async () => {
  gates.openAll();
  await Promise.all(apps.map((app) => app.close()));
  apps = [];
});
afterAll(async () => {
  for (const ns of namespaces) await dropNamespace(redis, ns);
  await redis.quit();
});

function space() {
  const namespace = uniqueNamespace('hc');
  namespaces.push(namespace);
  const keys = new RedisKeys('sluice', namespace);
  const start = async (worker: { enabled?: boolean; concurrency?: number }) => {
    const app = await createApp([HoldWorkflow], { namespace, worker });
    apps.push(app);
    return app;
  };
  return { namespace, keys, producer: () => start({ enabled: false }), worker: (concurrency = 5) => start({ concurrency }) };
}

describe('handoffs on the worker channel', () => {
  it('publishes the run, claimed, to a parked worker that names its channel; the wake list stays empty', async () => {
    const s = space();
    const listener = redis.duplicate();
    const messages: string[] = [];
    listener.on('message', (channel: string, message: string) => channel === s.keys.handoff('w1') && messages.push(message));
    await listener.subscribe(s.keys.handoff('w1'));
    try {
      await redis.zadd(s.keys.workflow('hc.hold', 'parked'), Date.now() + 60_000, 'w1:h:45000');
      const producer = await s.producer();
      const input = { key: 'published' };
      const h = await producer.client.enqueue(HoldWorkflow, input);
      await pollUntil(
        async () => messages.length,
        (n) => n > 0,
        'the handoff message',
      );
      const token = firstToken(await createdAtOf(redis, s.keys, h.id));
      expect(messages).toEqual([`hc.hold ${token} ${h.id} ${JSON.stringify(input)}`]);
      expect(await redis.hmget(s.keys.run(h.id), 'state', 'token', 'attempts')).toEqual(['active', token, '1']);
      expect(await redis.llen(s.keys.wake('hc.hold'))).toBe(0);
      expect(await redis.zcard(s.keys.workflow('hc.hold', 'parked'))).toBe(0); // taken by the handoff
      // The lease the announcement named.
      const leaseEnd = Number(await redis.zscore(s.keys.leases, h.id));
      expect(leaseEnd - Number(await redis.hget(s.keys.run(h.id), 'startedAt'))).toBe(45_000);
    } finally {
      listener.disconnect();
    }
  });

  it('queues the run when the publish reaches nobody (the worker’s subscriber is gone), and it runs once', async () => {
    const s = space();
    await redis.zadd(s.keys.workflow('hc.hold', 'parked'), Date.now() + 60_000, 'gone:h:30000');
    const producer = await s.producer();
    const h = await producer.client.enqueue(HoldWorkflow, { key: 'queued' });
    expect(await redis.hmget(s.keys.run(h.id), 'state', 'startedAt')).toEqual(['waiting', null]);
    expect(await redis.zscore(s.keys.leases, h.id)).toBeNull();
    expect(await redis.lrange(s.keys.wake('hc.hold'), 0, -1)).toEqual(['1']);
    expect(await redis.zcard(s.keys.workflow('hc.hold', 'parked'))).toBe(0);
    await s.worker();
    expect(await h.result({ timeoutMs: 10_000 })).toEqual({ key: 'queued', attempt: 1 });
  });

  it('a busy worker whose blocking read pops a marker passes it on', async () => {
    const s = space();
    await s.worker(1);
    const producer = await s.producer();
    await waitParked(redis, s.keys, 'hc.hold');
    // Handed over on the channel: the worker is busy, its blocking read still under way.
    const held = await producer.client.enqueue(HoldWorkflow, { key: 'busy', hold: true });
    await begun.get('busy').promise;
    const monitor = await monitorCommands(s.namespace);
    try {
      const wakeKey = s.keys.wake('hc.hold');
      await redis.rpush(wakeKey, '1');
      const isPush = (args: MonitoredCommand) => args[0] === 'rpush' && args[1] === wakeKey && args.source !== 'lua';
      const ours: MonitoredCommand = await monitor.next(isPush);
      const passedOn: MonitoredCommand = await monitor.next(isPush);
      expect(passedOn.source).not.toBe(ours.source);
      expect(await redis.lrange(wakeKey, 0, -1)).toEqual(['1']);
    } finally {
      await monitor.close();
    }
    gates.open('busy');
    expect(await held.result({ timeoutMs: 10_000 })).toEqual({ key: 'busy', attempt: 1 });
  });
});
