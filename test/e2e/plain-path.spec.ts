import 'reflect-metadata';
import type Redis from 'ioredis';
import { NonRetryableError, QueueAdmin, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, isCluster, rawRedis, uniqueNamespace, type TestApp } from '../support/app';
import { LiveGauge } from '../support/flow';
import { commandsBefore, monitorCommands, type MonitoredCommand } from '../support/workflows';

/**
 * Pay for what you use: a namespace with no caps, controls or kept settings has no limits hash,
 * and its claiming calls look for that hash once (EXISTS) instead of reading a field of it per
 * cap they would check. A cap set later, between two calls, is honoured by the next one.
 */

const live = new LiveGauge();

@Workflow('plain.echo')
class EchoWorkflow {
  async run(input: { n: number; hold?: boolean }) {
    if (!input.hold) return input.n;
    live.enter('echo');
    try {
      await new Promise((resolve) => setTimeout(resolve, 5));
    } finally {
      live.leave('echo');
    }
    return input.n;
  }
}

@Workflow('plain.failing', { attempts: 1 })
class FailingWorkflow {
  async run() {
    throw new NonRetryableError('no');
  }
}

describe('the plain path (no limits hash)', () => {
  let app: TestApp;
  let redis: Redis;
  let keys: RedisKeys;
  let namespace: string;

  beforeAll(async () => {
    namespace = uniqueNamespace('plain');
    keys = new RedisKeys('sluice', namespace);
    redis = rawRedis();
    app = await createApp([EchoWorkflow, FailingWorkflow], { namespace, worker: { concurrency: 8 } });
  });

  afterAll(async () => {
    await app?.close();
    redis?.disconnect();
  });

  it('runs without a limits hash, and never reads a field of one', async () => {
    const monitor = isCluster(redis) ? undefined : await monitorCommands();
    try {
      const results = await Promise.all(Array.from({ length: 20 }, (_, n) => app.client.run(EchoWorkflow, { n }, { timeoutMs: 10_000 })));
      expect(results).toEqual(Array.from({ length: 20 }, (_, n) => n));
      expect(await redis.exists(keys.limits)).toBe(0);
      if (monitor) {
        // Everything the runs above sent comes before the sentinel; a field read would be among it.
        const seen = await commandsBefore(monitor, redis, `${keys.base}sentinel`);
        expect(seen.filter((args) => ['hget', 'hmget'].includes(args[0]) && args[1] === keys.limits)).toEqual([]);
      }
    } finally {
      await monitor?.close();
    }
  });

  it("a producer's enqueue of a generated id, due at once, reads nothing first: no look for the record, no clock", async () => {
    const producerKeys = new RedisKeys('sluice', uniqueNamespace('plain-producer'));
    const producer = await createApp([EchoWorkflow], { namespace: producerKeys.namespace, worker: { enabled: false } });
    const monitor = isCluster(redis) ? undefined : await monitorCommands();
    try {
      const generated = await producer.client.enqueue(EchoWorkflow, { n: 1 });
      const given = await producer.client.enqueue(EchoWorkflow, { n: 2 }, { id: 'given-1' });
      expect([generated.created, given.created]).toEqual([true, true]);
      if (monitor) {
        const seen = await commandsBefore(monitor, redis, `${keys.base}sentinel`);
        const onRecord = (id: string) => seen.filter((args) => args[1] === producerKeys.run(id)).map((args) => args[0]);
        expect(onRecord(generated.id)).toEqual(['hset']);
        // A caller-given id may exist: it is looked for (and its record is lean or not by the layout, hence the clock).
        expect(onRecord('given-1')).toEqual(['hmget', 'hset']);
        // The clock reads of the producer's two enqueue calls (this file's worker, in another
        // namespace, reads the clock in its own calls meanwhile, and other files' clients read it
        // too).
        const ran = enqueueCommands(seen, producerKeys);
        expect(ran).toHaveLength(2);
        expect(ran.map((commands) => commands.filter((args) => args[0] === 'time').length)).toEqual([0, 1]);
      }
      expect(await producer.client.get(generated.id)).toMatchObject({ state: 'waiting', input: { n: 1 } });
    } finally {
      await monitor?.close();
      await producer.close();
    }
  });

  it("a producer's enqueue behind runs already queued appends the run and writes its record, and looks at nothing else", async () => {
    const producerKeys = new RedisKeys('sluice', uniqueNamespace('plain-behind'));
    const producer = await createApp([EchoWorkflow], { namespace: producerKeys.namespace, worker: { enabled: false } });
    const monitor = isCluster(redis) ? undefined : await monitorCommands();
    try {
      const handles = [];
      for (let n = 0; n < 3; n++) handles.push(await producer.client.enqueue(EchoWorkflow, { n }));
      expect(await redis.lrange(`${producerKeys.base}wf:plain.echo:queue`, 0, -1)).toEqual(handles.map((handle) => handle.id));
      // One wake marker, from the first run: the lane was empty.
      expect(await redis.lrange(`${producerKeys.base}wf:plain.echo:wake`, 0, -1)).toEqual(['1']);
      if (monitor) {
        const ran = enqueueCommands(await commandsBefore(monitor, redis, `${keys.base}sentinel`), producerKeys);
        const names = ran.map((commands) => commands.map((args) => args[0]));
        // The first looks for a parked worker (none) and wakes the lane; the next two see it hold runs.
        expect(names[0]).toEqual(['rpushx', 'zpopmax', 'hset', 'rpush', 'lindex', 'rpush']);
        expect(names.slice(1)).toEqual([
          ['rpushx', 'hset'],
          ['rpushx', 'hset'],
        ]);
      }
    } finally {
      await monitor?.close();
      await producer.close();
    }
  });

  it('a caller that waits on its run (run()) looks for a parked worker first: it appends nothing ahead of that', async () => {
    const monitor = isCluster(redis) ? undefined : await monitorCommands();
    try {
      expect(await app.client.run(EchoWorkflow, { n: 7 }, { timeoutMs: 10_000 })).toBe(7);
      if (monitor) {
        const ran = enqueueCommands(await commandsBefore(monitor, redis, `${keys.base}sentinel`), keys);
        expect(ran).toHaveLength(1);
        expect(ran[0][0][0]).toBe('zpopmax');
        expect(ran[0].map((args) => args[0])).not.toContain('rpushx');
      }
    } finally {
      await monitor?.close();
    }
  });

  it('a cap set between two calls holds from the next one on', async () => {
    await app.app.get(QueueAdmin).setLimits({ workflow: 'plain.echo', limit: 2 });
    live.resetMax('echo');
    const handles = await Promise.all(Array.from({ length: 12 }, (_, n) => app.client.enqueue(EchoWorkflow, { n, hold: true })));
    await Promise.all(handles.map((handle) => handle.result({ timeoutMs: 10_000 })));
    expect(live.max('echo')).toBe(2);
    await app.app.get(QueueAdmin).setLimits({ workflow: 'plain.echo', limit: null });
  });

  it('a failed run is indexed with the retention it was kept for', async () => {
    const other = uniqueNamespace('plain-failed');
    const otherKeys = new RedisKeys('sluice', other);
    const second = await createApp([FailingWorkflow], { namespace: other, worker: { concurrency: 1 } });
    try {
      const handle = await second.client.enqueue(FailingWorkflow, {});
      await expect(handle.result({ timeoutMs: 10_000 })).rejects.toThrow('no');
      // The failure index is trimmed by the longest retention of the records it points at.
      expect(Number(await redis.hget(otherKeys.limits, 'wf:plain.failing:ttl-max'))).toBeGreaterThan(0);
    } finally {
      await second.close();
    }
  });
});

/** What each enqueue call of `keys`' namespace ran, in order: the commands its script sent (MONITOR shows them after the call). */
function enqueueCommands(seen: MonitoredCommand[], keys: RedisKeys): MonitoredCommand[][] {
  const ran: MonitoredCommand[][] = [];
  let current: MonitoredCommand[] | undefined;
  for (const args of seen) {
    if (['fcall', 'evalsha', 'blpop'].includes(args[0])) {
      current = args[0] === 'fcall' && /_enqueue$/.test(args[1]) && args[3].startsWith(keys.run('')) ? [] : undefined;
      if (current) ran.push(current);
    } else if (args.source === 'lua') current?.push(args);
  }
  return ran;
}
