import 'reflect-metadata';
import type Redis from 'ioredis';
import { RunContext, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Gates, namespaceKeys, pollUntil } from '../support/workflows';

/**
 * Interval schedules (`every`) on a real server: they fire at `offsetMs + k × every` since the
 * epoch through the same due-index as cron, with the same catch-up and overlap rules, declared in
 * code or made at runtime, and show in getSchedule/listSchedules as `every`/`offsetMs`.
 */
jest.setTimeout(30_000);

@Workflow('every.tick')
class Tick {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.runId;
  }
}

const gates = new Gates();
@Workflow('every.gated')
class Gated {
  async run(_input: unknown, ctx: RunContext) {
    await gates.get(ctx.runId).promise;
    return ctx.runId;
  }
}

@Workflow('every.declared', { schedules: [{ every: '1s', offsetMs: 250, input: { from: 'code' } }] })
class Declared {
  async run(input: { from: string }) {
    return input.from;
  }
}

describe('schedules: every', () => {
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

  async function app(ns: string, worker: boolean, providers: Array<new () => object> = [Tick, Gated]): Promise<TestApp> {
    const started = await createApp(providers, { namespace: ns, worker: { enabled: worker, stalledIntervalMs: 300 } });
    apps.push(started);
    return started;
  }

  function namespace(): { ns: string; keys: RedisKeys } {
    const ns = uniqueNamespace('every');
    namespaces.push(ns);
    return { ns, keys: new RedisKeys('sluice', ns) };
  }

  const redisNow = async () => {
    const [s, us] = await redis.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };

  async function runsOf(ns: string, keys: RedisKeys, id: string): Promise<string[]> {
    return (await namespaceKeys(redis, ns))
      .filter((key) => key.startsWith(keys.run(`${id}@`)))
      .map((key) => key.slice(keys.run('').length))
      .sort();
  }
  const timesOf = (ids: string[]) => ids.map((id) => Number(id.split('@')[1]));

  it('fires at the epoch-aligned instants plus the offset, one run per occurrence', async () => {
    const { ns, keys } = namespace();
    const { client } = await app(ns, true);
    const info = await client.schedule('ticks', Tick, { every: '1s', offsetMs: 400 });
    expect(info).toMatchObject({ every: 1_000, offsetMs: 400 });
    expect(info).not.toHaveProperty('cron');
    expect(info.upcoming.every((d) => d.getTime() % 1_000 === 400)).toBe(true);
    const ids = await pollUntil(
      () => runsOf(ns, keys, 'ticks'),
      (found) => found.length >= 3,
      'three fires',
    );
    await client.pauseSchedule('ticks');
    const times = timesOf(await runsOf(ns, keys, 'ticks'));
    expect(times.every((t, i) => t % 1_000 === 400 && (i === 0 || t - times[i - 1] === 1_000))).toBe(true);
    await expect(Promise.all(ids.map((id) => client.wait(id, { timeoutMs: 5_000 })))).resolves.toEqual(ids);
    const listed = await client.listSchedules({ workflow: 'every.tick' });
    expect(listed.schedules.map((s) => [s.id, s.every, s.offsetMs, s.paused])).toEqual([['ticks', 1_000, 400, true]]);
  });

  it('declared on @Workflow: written at bootstrap and fired with its input', async () => {
    const { ns, keys } = namespace();
    const { client } = await app(ns, true, [Declared]);
    expect(await client.getSchedule('every.declared')).toMatchObject({ every: 1_000, offsetMs: 250, source: 'code' });
    const [first] = await pollUntil(
      () => runsOf(ns, keys, 'every.declared'),
      (found) => found.length >= 1,
      'a fire',
    );
    expect(timesOf([first])[0] % 1_000).toBe(250);
    await expect(client.wait(first, { timeoutMs: 5_000 })).resolves.toBe('code');
  });

  it('changing the interval replans: the next occurrences follow the new one', async () => {
    const { ns } = namespace();
    const { client } = await app(ns, false);
    await client.schedule('re', Tick, { every: '1m' });
    const changed = await client.schedule('re', Tick, { every: '1h', offsetMs: 60_000 });
    expect(changed.upcoming.map((d) => d.getTime() % 3_600_000)).toEqual(changed.upcoming.map(() => 60_000));
    const toCron = await client.schedule('re', Tick, { cron: '0 0 * * *' });
    expect(toCron).toMatchObject({ cron: '0 0 * * *' });
    expect(toCron).not.toHaveProperty('every');
  });

  describe('downtime: the catch-up rules of cron', () => {
    async function missSome(catchUp: { catchUp?: 'latest' | 'all'; catchUpLimit?: number }) {
      const { ns, keys } = namespace();
      const producer = await app(ns, false);
      await producer.client.schedule('gap', Tick, { every: '1s', ...catchUp });
      const defined = await redisNow();
      // Workers away for at least four occurrences.
      await pollUntil(redisNow, (now) => now > defined + 4_200, 'four missed occurrences');
      const worker = await app(ns, true);
      const ids = await pollUntil(
        () => runsOf(ns, keys, 'gap'),
        (found) => found.length >= 1,
        'the catch-up',
      );
      await worker.client.pauseSchedule('gap');
      await Promise.all(ids.map((id) => worker.client.wait(id, { timeoutMs: 5_000 })));
      return { ids: await runsOf(ns, keys, 'gap'), info: (await worker.client.getSchedule('gap'))!, defined };
    }

    it("fires once by default (catchUp 'latest'), the latest occurrence", async () => {
      const { ids, info, defined } = await missSome({});
      // The first fire is the catch-up, the latest occurrence missed (at least 4.2 s after the
      // definition, so at least 3.2 s): none of the earlier ones fired. One more may follow before the pause.
      const times = timesOf(ids);
      expect(times.every((t) => t >= defined + 3_200)).toBe(true);
      expect(info.skipped).toBeGreaterThanOrEqual(3);
    });

    it("fires up to catchUpLimit with catchUp 'all'", async () => {
      const { ids, info } = await missSome({ catchUp: 'all', catchUpLimit: 2 });
      const times = timesOf(ids);
      expect(times[1] - times[0]).toBe(1_000);
      expect(info.skipped).toBeGreaterThanOrEqual(2);
    });
  });

  it('overlap: false skips occurrences while the previous run is going', async () => {
    const { ns, keys } = namespace();
    const { client } = await app(ns, true);
    await client.schedule('serial', Gated, { every: '1s', overlap: false });
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
    gates.open(first);
    await client.wait(first, { timeoutMs: 5_000 });
    await client.pauseSchedule('serial');
  });
});
