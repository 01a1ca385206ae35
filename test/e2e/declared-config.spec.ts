import type Redis from 'ioredis';
import { Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { dropNamespace, rawRedis, uniqueNamespace } from '../support/app';
import { CapturingLogger, FlowApp, startFlowApp } from '../support/flow';

/**
 * Declared config must not fight the operator (issue 27, item 7d): values set at runtime outlive
 * worker restarts until the code's declaration changes, and an older pod's bootstrap does not
 * delete the schedules a newer declaration added.
 */

// Two versions of one workflow's code: V2 changes the workflow cap and the rate limit only.
@Workflow('dc.caps', { concurrency: 5, groupConcurrency: 2, rateLimit: { max: 10, perMs: 1_000 } })
class CapsV1 {
  run() {
    return 1;
  }
}
@Workflow('dc.caps', { concurrency: 8, groupConcurrency: 2, rateLimit: { max: 6, perMs: 1_000 } })
class CapsV2 {
  run() {
    return 2;
  }
}

let redis: Redis;
const namespaces: string[] = [];
const open: FlowApp[] = [];

function space(): { ns: string; keys: RedisKeys } {
  const ns = uniqueNamespace('dcfg');
  namespaces.push(ns);
  return { ns, keys: new RedisKeys('sluice', ns) };
}

/** Boots an app, returns it with the lines its bootstrap logged. */
async function boot(
  providers: Parameters<typeof startFlowApp>[0],
  ns: string,
  concurrency = 50,
): Promise<{ app: FlowApp; lines: string[] }> {
  const logger = new CapturingLogger();
  const app = await startFlowApp(providers, { namespace: ns, concurrency }, logger);
  open.push(app);
  return { app, lines: logger.lines };
}

async function restart(app: FlowApp): Promise<void> {
  await app.close();
  open.splice(open.indexOf(app), 1);
}

beforeAll(() => void (redis = rawRedis()));
afterAll(async () => {
  for (const app of open) await app.close();
  for (const ns of namespaces) await dropNamespace(redis, ns);
  await redis.quit();
});

describe('caps and rate limits set at runtime', () => {
  const { ns, keys } = space();
  let current: FlowApp;

  it('survive a worker restart with the same code; getLimits says who set them', async () => {
    const { app: first } = await boot([CapsV1], ns);
    await first.client.setLimits({ limit: 100 });
    await first.client.setLimits({ workflow: 'dc.caps', limit: 20 });
    await first.client.setLimits({ workflow: 'dc.caps', group: '*', limit: 4 });
    await first.client.setLimits({ workflow: 'dc.caps', rateLimit: { max: 3, perMs: 500 } });
    await first.client.setLimits({ workflow: 'dc.caps', group: 'vip', limit: 9 }); // never declared: no record
    const expected = {
      namespace: 100,
      workflow: 20,
      groupDefault: 4,
      rateLimit: { max: 3, perMs: 500 },
      groupRateLimit: null,
      setAtRuntime: {
        namespace: { declared: 50 },
        workflow: { declared: 5 },
        groupDefault: { declared: 2 },
        rateLimit: { declared: { max: 10, perMs: 1_000 } },
      },
    };
    expect(await first.client.getLimits({ workflow: 'dc.caps' })).toEqual(expected);
    await restart(first);

    const { app: again, lines } = await boot([CapsV1], ns);
    expect(await again.client.getLimits({ workflow: 'dc.caps' })).toEqual(expected);
    expect(lines.filter((line) => line.includes('Fleet-wide')).sort()).toEqual([
      expect.stringContaining('Fleet-wide cap ns kept at 100, set at runtime (the code declares 50'),
      expect.stringContaining('Fleet-wide cap wf:dc.caps kept at 20, set at runtime (the code declares 5'),
      expect.stringContaining('Fleet-wide cap wf:dc.caps:group kept at 4, set at runtime (the code declares 2'),
      expect.stringContaining('Fleet-wide rate limit of dc.caps kept at 3 per 500 ms, set at runtime (the code declares 10 per 1000 ms'),
    ]);
    expect(await redis.hget(keys.limits, 'wf:dc.caps:g:vip')).toBe('9');
    await restart(again);
  });

  it('give way to a changed declaration at the next boot, which logs it; the others stay', async () => {
    const { app, lines } = await boot([CapsV2], ns);
    current = app;
    expect(await app.client.getLimits({ workflow: 'dc.caps' })).toEqual({
      namespace: 100,
      workflow: 8,
      groupDefault: 4,
      rateLimit: { max: 6, perMs: 1_000 },
      groupRateLimit: null,
      setAtRuntime: { namespace: { declared: 50 }, groupDefault: { declared: 2 } },
    });
    expect(lines).toContainEqual(expect.stringContaining('Fleet-wide cap wf:dc.caps changed from 20, set at runtime, to 8'));
    expect(lines).toContainEqual(
      expect.stringContaining('Fleet-wide rate limit of dc.caps changed from 3 per 500 ms, set at runtime, to 6 per 1000 ms'),
    );
  });

  it('setting the declared value again hands a cap back to the code', async () => {
    const app = current;
    expect(await app.client.setLimits({ workflow: 'dc.caps', group: '*', limit: 2 })).toBe(4);
    expect(await app.client.setLimits({ limit: 50 })).toBe(100);
    expect((await app.client.getLimits({ workflow: 'dc.caps' })).setAtRuntime).toBeUndefined();
    expect(await redis.exists(keys.runtimeLimits)).toBe(0);
  });

  it("a value the previous version wrote (no record of who set it) is the code's: a bootstrap replaces it", async () => {
    await redis.hset(keys.limits, 'wf:dc.caps', '77');
    await restart(current);
    const { app } = await boot([CapsV2], ns);
    expect(await app.client.getLimits({ workflow: 'dc.caps' })).toMatchObject({ workflow: 8 });
  });
});

// The same workflow's code once it declares no rate limit.
@Workflow('dc.caps', { concurrency: 8, groupConcurrency: 2 })
class CapsNoRate {
  run() {
    return 3;
  }
}

describe('a rate limit the code stops declaring', () => {
  const { ns, keys } = space();

  it('is removed by the next boot; later boots find nothing to remove', async () => {
    const { app } = await boot([CapsV1], ns);
    expect(await app.client.getLimits({ workflow: 'dc.caps' })).toMatchObject({ rateLimit: { max: 10, perMs: 1_000 } });
    await restart(app);
    for (let boots = 0; boots < 2; boots++) {
      const { app: next } = await boot([CapsNoRate], ns);
      expect(await next.client.getLimits({ workflow: 'dc.caps' })).toMatchObject({ workflow: 8, rateLimit: null, groupRateLimit: null });
      expect(await redis.hmget(keys.limits, 'wf:dc.caps:rate', 'wf:dc.caps:rate-ms')).toEqual([null, null]);
      await restart(next);
    }
  });
});

// Three versions of one workflow's schedules: V2 adds dc.b, V3 drops it again and changes dc.a.
@Workflow('dc.sched', { schedules: [{ id: 'dc.a', cron: '0 * * * *' }] })
class SchedV1 {
  run() {
    return 1;
  }
}
@Workflow('dc.sched', {
  schedules: [
    { id: 'dc.a', cron: '0 * * * *' },
    { id: 'dc.b', cron: '30 * * * *' },
  ],
})
class SchedV2 {
  run() {
    return 2;
  }
}
@Workflow('dc.sched', { schedules: [{ id: 'dc.a', cron: '5 * * * *' }] })
class SchedV3 {
  run() {
    return 3;
  }
}

describe('declared schedules during a rolling deploy', () => {
  const { ns, keys } = space();
  const scheduleLines = (lines: string[]) => lines.filter((line) => line.includes('Schedule "'));

  it("an older pod booting after a newer one (old → new → old) leaves the newer code's schedule alone, and says so", async () => {
    const { app: old } = await boot([SchedV1], ns);
    const { app: next, lines: nextLines } = await boot([SchedV2], ns);
    expect(scheduleLines(nextLines)).toEqual([expect.stringContaining('Schedule "dc.b" added')]);
    await restart(old);
    const { app: oldAgain, lines } = await boot([SchedV1], ns);
    expect(await oldAgain.client.getSchedule('dc.b')).toMatchObject({ workflow: 'dc.sched', source: 'code', cron: '30 * * * *' });
    expect(await redis.zscore(keys.workflow('dc.sched', 'next-fires'), 'dc.b')).not.toBeNull();
    expect(await redis.sismember(keys.workflow('dc.sched', 'declared'), 'dc.b')).toBe(1);
    expect(scheduleLines(lines)).toEqual([
      expect.stringContaining('Schedule "dc.b" left alone: this code does not declare it, but a newer version of the code does'),
    ]);
    await restart(next);
    await restart(oldAgain);
  });

  it("a newer declaration that drops a schedule still removes it; a definition both declare is the latest bootstrap's", async () => {
    const { app: v3, lines } = await boot([SchedV3], ns);
    expect(scheduleLines(lines).sort()).toEqual([
      expect.stringContaining('Schedule "dc.a" changed'),
      expect.stringContaining('Schedule "dc.b" removed: the code no longer declares it'),
    ]);
    expect(await v3.client.getSchedule('dc.b')).toBeNull();
    await restart(v3);
    // Among declarations of a schedule both declare, the latest bootstrap wins, as before.
    const { app: v1, lines: v1Lines } = await boot([SchedV1], ns);
    expect(scheduleLines(v1Lines)).toEqual([expect.stringContaining('Schedule "dc.a" changed')]);
    expect(await v1.client.getSchedule('dc.b')).toBeNull();
    await restart(v1);
  });

  it('a declared schedule the previous version wrote (no declaration recorded) is removed once the code drops it', async () => {
    const { app: v2 } = await boot([SchedV2], ns);
    await restart(v2);
    await redis.hdel(keys.schedule('dc.b'), 'decl');
    // Even the oldest declaration removes it: nothing says a newer one declared it.
    const { app: v1 } = await boot([SchedV1], ns);
    expect(await v1.client.getSchedule('dc.b')).toBeNull();
  });
});

describe('a declared schedule changed at runtime', () => {
  const { ns } = space();
  let current: FlowApp;

  it("keeps the operator's definition across restarts of the same code, until the code declares another", async () => {
    const { app: first } = await boot([SchedV1], ns);
    await first.client.schedule('dc.a', 'dc.sched', { cron: '45 * * * *' });
    expect(await first.client.getSchedule('dc.a')).toMatchObject({ cron: '45 * * * *', source: 'code', changedAtRuntime: true });
    await restart(first);

    const { app: again, lines } = await boot([SchedV1], ns);
    expect(await again.client.getSchedule('dc.a')).toMatchObject({ cron: '45 * * * *', changedAtRuntime: true });
    expect(lines.filter((line) => line.includes('Schedule "'))).toEqual([
      expect.stringContaining('Schedule "dc.a" kept as changed at runtime'),
    ]);
    await restart(again);

    const { app: v3, lines: v3Lines } = await boot([SchedV3], ns);
    current = v3;
    const info = await v3.client.getSchedule('dc.a');
    expect(info).toMatchObject({ cron: '5 * * * *', source: 'code' });
    expect(info).not.toHaveProperty('changedAtRuntime');
    expect(v3Lines).toContainEqual(expect.stringContaining('Schedule "dc.a" changed'));
  });

  it('setting the declared definition again hands it back to the code', async () => {
    const app = current;
    await app.client.schedule('dc.a', 'dc.sched', { cron: '50 * * * *' });
    expect(await app.client.getSchedule('dc.a')).toMatchObject({ changedAtRuntime: true });
    await app.client.schedule('dc.a', 'dc.sched', { cron: '5 * * * *' });
    expect(await app.client.getSchedule('dc.a')).not.toHaveProperty('changedAtRuntime');
  });
});
