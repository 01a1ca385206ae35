import { parseCompleteReply } from '../../lib/redis/commands/complete.command';
import { newCallId } from '../../lib/redis/commands/call-id';
import type Redis from 'ioredis';
import { LuaScripts } from '../../lib/redis/lua.scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { dropNamespace, rawRedis, uniqueNamespace } from '../support/app';
import { scriptsOn } from '../support/scripts';
import { enqueueArgs, enqueueKeys } from '../support/queue-state';

/** The group round-robin past the 64 groups one call reads at a time. */
describe('group round-robin, script level', () => {
  let redis: Redis;
  let scripts: LuaScripts;
  const namespaces: string[] = [];

  beforeAll(() => {
    redis = rawRedis();
    scripts = scriptsOn(redis);
  });
  afterAll(async () => {
    for (const ns of namespaces) await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('a group further back than 64 keeps its place when one of its runs completes', async () => {
    const ns = uniqueNamespace('ring');
    namespaces.push(ns);
    const keys = new RedisKeys('sluice', ns);
    const group = (i: number) => `g${String(i).padStart(2, '0')}`;
    const enqueue = (id: string, g: string, fastPath: boolean) =>
      scripts.run<string>('enqueue', enqueueKeys(keys, id), enqueueArgs(keys, 'w', id, {}, fastPath, 30_000, false, { group: g }));
    await scripts.run('set-limits', [keys.limits, keys.seq], [keys.base, 'wf:w:group', 5, 'w', '*']);
    // g70 gets an active run (through the fast path, the one way to start a run without claiming from the ring).
    await scripts.run('park', [keys.leases], [keys.base, 'worker-1', 10_000, 'w']);
    expect(await enqueue('A', group(70), true)).toBe('+active');
    await redis.lpop(keys.wake('w'));
    for (let i = 0; i < 80; i++) await enqueue(`r${i}`, group(i), false);
    const before = await redis.zrange(keys.workflow('w', 'ready'), 0, -1);
    expect(before.indexOf(group(70))).toBe(70);

    // Completing A frees a slot of g70 and refills one slot: the ring serves g00, not g70.
    const reply = parseCompleteReply(
      await scripts.run<unknown[]>(
        'complete',
        [keys.call(newCallId())],
        [keys.base, 60_000, 1, 30_000, 0, '', 0, '', 1, 'w', 0, 'A', (await redis.hget(keys.run('A'), 'token'))!, '"ok"', ''],
      ),
    );
    expect(reply).toMatchObject({ completed: [true], saved: [], parked: false });
    expect(reply.claims.map((claim) => claim.id)).toEqual(['r0']);
    const after = await redis.zrange(keys.workflow('w', 'ready'), 0, -1);
    expect(after).not.toContain(group(0)); // its one run was claimed: it ran dry and left
    expect(after.indexOf(group(70))).toBe(69); // g70 kept its place, ahead of g71..g79
    expect(after[after.length - 1]).toBe(group(79));
  });
});
