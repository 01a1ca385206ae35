import 'reflect-metadata';
import Redis from 'ioredis';
import { RedisCommandError, Workflow } from '../../lib';
import { createApp, type TestApp, uniqueNamespace } from '../support/app';
import { LocalRedis, startRedisServer } from '../support/redis-server';

@Workflow('flags.w')
class FlagsWorkflow {
  async run(input: { n: number }): Promise<number> {
    return input.n;
  }
}

/**
 * The scripts' Redis 7 flags (`#!lua`), on a server of the test's own whose memory is full
 * (`maxmemory 1`, noeviction): a script that adds data is refused whole before it runs — nothing
 * written — while the scripts that read or free memory (listRuns, listSchedules, stats, cancel,
 * remove) still work, so an operator can look and make room. Then, with memory back, all is normal.
 */
describe('script flags when Redis is out of memory', () => {
  let server: LocalRedis;
  let admin: Redis;
  let app: TestApp;

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
  });
  afterAll(async () => {
    await app?.close();
    admin?.disconnect();
    await server?.stop();
  });

  it('refuses what adds data whole, and still reads, cancels and removes', async () => {
    app = await createApp([FlagsWorkflow], {
      namespace: uniqueNamespace('flags'),
      connection: { url: server.url },
      worker: { enabled: false },
    });
    const [first, second] = await Promise.all([app.client.enqueue(FlagsWorkflow, { n: 1 }), app.client.enqueue(FlagsWorkflow, { n: 2 })]);
    await admin.config('SET', 'maxmemory', '1');
    try {
      const keysBefore = await admin.dbsize();
      const refused = await app.client.enqueue(FlagsWorkflow, { n: 3 }).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(RedisCommandError);
      expect(String((refused as RedisCommandError).cause)).toMatch(/^ReplyError: OOM /);
      expect(await admin.dbsize()).toBe(keysBefore);

      const page = await app.client.listRuns({ workflow: FlagsWorkflow, state: 'waiting' });
      expect(page.runs.map((run) => run.id).sort()).toEqual([first.id, second.id].sort());
      expect((await app.client.stats({ workflow: FlagsWorkflow })).workflows['flags.w']).toMatchObject({ waiting: 2 });
      expect((await app.client.listSchedules()).schedules).toEqual([]);
      expect(await app.client.cancel(first.id)).toMatchObject({ cancelled: true });
      expect(await app.client.get(first.id)).toMatchObject({ state: 'cancelled' });
      expect(await app.client.remove(first.id)).toBe(true);
      expect(await app.client.get(first.id)).toBeNull();
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    const third = await app.client.enqueue(FlagsWorkflow, { n: 3 });
    expect(await app.client.get(third.id)).toMatchObject({ state: 'waiting' });
  });
});
