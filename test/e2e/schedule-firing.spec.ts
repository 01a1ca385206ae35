import 'reflect-metadata';
import type Redis from 'ioredis';
import { RunContext, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Gates, namespaceKeys, pollUntil } from '../support/workflows';

/**
 * Firing: a schedule fires through the workers' reserve calls at the hash's times, repairs stale
 * index entries, collapses or bounds a backlog after downtime, and skips while its previous run
 * is going when `overlap: false`.
 */
jest.setTimeout(30_000);

@Workflow('fire.tick')
class Tick {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.runId;
  }
}

const gates = new Gates();
@Workflow('fire.gated')
class Gated {
  async run(_input: unknown, ctx: RunContext) {
    await gates.get(ctx.runId).promise;
    return ctx.runId;
  }
}

describe('schedules: firing', () => {
  let redis: Redis;
  const apps: TestApp[] = [];
  const namespaces: string[] = [];

  beforeAll(() => {
    redis = rawRedis();
  });
  afterAll(async () => {
    gates.openAll();
    await Promise.all(apps.map((app) => app.close()));
    for (const ns of namespaces) await dropNamespace(redis, ns);
    redis.disconnect();
  });

  async function app(ns: string, worker: boolean, extra: object = {}): Promise<TestApp> {
    const started = await createApp([Tick, Gated], { namespace: ns, worker: { enabled: worker, stalledIntervalMs: 300, ...extra } });
    apps.push(started);
    return started;
  }

  function namespace(): { ns: string; keys: RedisKeys } {
    const ns = uniqueNamespace('fire');
    namespaces.push(ns);
    return { ns, keys: new RedisKeys('sluice', ns) };
  }

  const redisNow = async () => {
    const [s, us] = await redis.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };

  /** Ids of the runs a schedule started, by listing the namespace. */
  async function runsOf(ns: string, keys: RedisKeys, id: string): Promise<string[]> {
    return (await namespaceKeys(redis, ns))
      .filter((key) => key.startsWith(keys.run(`${id}@`)))
      .map((key) => key.slice(keys.run('').length))
      .sort();
  }

  /**
   * A 6-field cron firing at five whole seconds from two seconds ahead (and, by the fields'
   * cross product, at a few instants at least a minute away from them): a schedule whose
   * occurrences all pass while no worker runs, i.e. downtime, without waiting for a real cron period.
   */
  async function fiveSecondWindow(): Promise<{ cron: string; times: number[] }> {
    const first = Math.ceil((await redisNow()) / 1000) * 1000 + 2000;
    const times = [0, 1, 2, 3, 4].map((i) => first + i * 1000);
    const field = (part: (d: Date) => number) => [...new Set(times.map((t) => part(new Date(t))))].join(',');
    const cron = [
      field((d) => d.getUTCSeconds()),
      field((d) => d.getUTCMinutes()),
      field((d) => d.getUTCHours()),
      field((d) => d.getUTCDate()),
      field((d) => d.getUTCMonth() + 1),
      '*',
    ].join(' ');
    return { cron, times };
  }

  it('fires every second at the hash times, one run per occurrence with the id <schedule>@<ms>', async () => {
    const { ns, keys } = namespace();
    const { client } = await app(ns, true);
    await client.schedule('every-second', Tick, { cron: '* * * * * *' });
    await pollUntil(
      () => runsOf(ns, keys, 'every-second'),
      (ids) => ids.length >= 3,
      'three fires',
    );
    await client.pauseSchedule('every-second');
    const ids = await runsOf(ns, keys, 'every-second');
    const times = ids.map((id) => Number(id.split('@')[1]));
    expect(times.every((t, i) => t % 1000 === 0 && (i === 0 || t - times[i - 1] === 1000))).toBe(true);
    await expect(Promise.all(ids.map((id) => client.wait(id, { timeoutMs: 5_000 })))).resolves.toEqual(ids);
    expect(await redis.hget(keys.run(ids[0]), 'schedule')).toBe('every-second');
  });

  describe('stale index entries are repaired, never trusted', () => {
    it('an entry scored before the hash (behind): re-scored to the hash, nothing fires early', async () => {
      const { ns, keys } = namespace();
      const { client } = await app(ns, true);
      const info = await client.schedule('yearly', Tick, { cron: '0 0 1 1 *' });
      await redis.zadd(keys.workflow('fire.tick', 'next-fires'), (await redisNow()) - 1_000, 'yearly');
      await redis.rpush(keys.wake('fire.tick'), '1');
      await pollUntil(
        () => redis.zscore(keys.workflow('fire.tick', 'next-fires'), 'yearly'),
        (score) => Number(score) === info.nextFireAt!.getTime(),
        'the repair',
      );
      expect(await runsOf(ns, keys, 'yearly')).toEqual([]);
      expect((await client.getSchedule('yearly'))!.fired).toBe(0);
    });

    it('an entry scored after the hash (ahead): the sweep re-scores it and the schedule fires at the hash time', async () => {
      const { ns, keys } = namespace();
      const { client } = await app(ns, true);
      const info = await client.schedule('ahead', Tick, { cron: '* * * * * *' });
      const staleScore = (await redisNow()) + 3_600_000;
      await redis.zadd(keys.workflow('fire.tick', 'next-fires'), staleScore, 'ahead');
      const hashTime = info.nextFireAt!.getTime();
      await pollUntil(
        () => runsOf(ns, keys, 'ahead'),
        (ids) => ids.includes(`ahead@${hashTime}`),
        'the fire at the hash time',
        10_000,
      );
      expect(Number(await redis.zscore(keys.workflow('fire.tick', 'next-fires'), 'ahead'))).toBeLessThan(staleScore);
    });

    it('an entry whose hash is gone: removed from the index and the listing, nothing fires', async () => {
      const { ns, keys } = namespace();
      const { client } = await app(ns, true);
      await client.schedule('gone', Tick, { cron: '0 0 1 1 *' });
      await redis.zadd(keys.workflow('fire.tick', 'next-fires'), (await redisNow()) - 1_000, 'gone');
      await redis.del(keys.schedule('gone'));
      await redis.rpush(keys.wake('fire.tick'), '1');
      await pollUntil(
        async () => [
          await redis.zscore(keys.workflow('fire.tick', 'next-fires'), 'gone'),
          await redis.zscore(keys.workflow('fire.tick', 'schedules'), 'gone'),
        ],
        (scores) => scores.every((s) => s === null),
        'the removal',
      );
      expect(await runsOf(ns, keys, 'gone')).toEqual([]);
    });

    it('an entry of a paused schedule: removed, nothing fires', async () => {
      const { ns, keys } = namespace();
      const { client } = await app(ns, true);
      await client.schedule('paused', Tick, { cron: '0 0 1 1 *' });
      await redis.hset(keys.schedule('paused'), 'paused', '1');
      await redis.zadd(keys.workflow('fire.tick', 'next-fires'), (await redisNow()) - 1_000, 'paused');
      await redis.rpush(keys.wake('fire.tick'), '1');
      await pollUntil(
        () => redis.zscore(keys.workflow('fire.tick', 'next-fires'), 'paused'),
        (score) => score === null,
        'the removal',
      );
      expect(await runsOf(ns, keys, 'paused')).toEqual([]);
    });
  });

  describe('downtime: occurrences missed while no worker ran', () => {
    async function missFive(catchUp: { catchUp?: 'latest' | 'all'; catchUpLimit?: number }, breakPlan = false) {
      const { ns, keys } = namespace();
      const producer = await app(ns, false);
      const { cron, times } = await fiveSecondWindow();
      await producer.client.schedule('window', Tick, { cron, ...catchUp });
      expect((await producer.client.getSchedule('window'))!.upcoming.map((d) => d.getTime())).toEqual(times);
      // Workers away longer than the plan reaches: Redis alone cannot tell the latest missed occurrence.
      if (breakPlan) await redis.hset(keys.schedule('window'), 'plan', '');
      await pollUntil(redisNow, (now) => now > times[4] + 200, 'five missed occurrences');
      const worker = await app(ns, true);
      await pollUntil(
        () => redis.hget(keys.schedule('window'), 'last'),
        (last) => Number(last) === times[4],
        'the catch-up',
        10_000,
      );
      const ids = await runsOf(ns, keys, 'window');
      await Promise.all(ids.map((id) => worker.client.wait(id, { timeoutMs: 5_000 })));
      return { ids, times, info: (await worker.client.getSchedule('window'))! };
    }

    it("fire once by default (catchUp 'latest'): the latest occurrence", async () => {
      const { ids, times, info } = await missFive({});
      expect(ids).toEqual([`window@${times[4]}`]);
      expect(info).toMatchObject({ fired: 1, skipped: 4, lastRunId: `window@${times[4]}` });
    });

    it("fire up to catchUpLimit with catchUp 'all': the latest ones", async () => {
      const { ids, times, info } = await missFive({ catchUp: 'all', catchUpLimit: 3 });
      expect(ids).toEqual(times.slice(2).map((t) => `window@${t}`));
      expect(info).toMatchObject({ fired: 3, skipped: 2 });
    });

    it('when the plan ran out, a worker replans from Redis time and the backlog still fires once', async () => {
      const { ids, times } = await missFive({}, true);
      expect(ids).toEqual([`window@${times[4]}`]);
    });
  });

  it('overlap: false skips occurrences while the previous run is going', async () => {
    const { ns, keys } = namespace();
    const { client } = await app(ns, true);
    await client.schedule('serial', Gated, { cron: '* * * * * *', overlap: false });
    const [first] = await pollUntil(
      () => runsOf(ns, keys, 'serial'),
      (ids) => ids.length === 1,
      'the first fire',
    );
    await pollUntil(
      () => client.getSchedule('serial'),
      (info) => info!.skipped >= 2,
      'two skipped occurrences',
      10_000,
    );
    expect(await runsOf(ns, keys, 'serial')).toEqual([first]);
    expect((await client.get(first))!.state).toBe('active');
    gates.open(first);
    await client.wait(first, { timeoutMs: 5_000 });
    const ids = await pollUntil(
      () => runsOf(ns, keys, 'serial'),
      (found) => found.length === 2,
      'the next fire after the run finished',
      5_000,
    );
    expect(Number(ids[1].split('@')[1]) - Number(first.split('@')[1])).toBeGreaterThanOrEqual(3_000);
    await client.pauseSchedule('serial');
    gates.open(ids[1]);
  });
});
