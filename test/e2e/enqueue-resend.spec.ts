import type Redis from 'ioredis';
import { enqueueRun } from '../../lib/redis/commands/enqueue.command';
import { enqueueChunk } from '../../lib/redis/commands/enqueue-many.command';
import type { LuaScripts } from '../../lib/redis/lua.scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { buildEnqueueRequest } from '../../lib/workflow/enqueue.request';
import { dropNamespace, rawRedis, uniqueNamespace } from '../support/app';
import { scriptsOn } from '../support/scripts';

/**
 * A call sent again after its reply was lost finds the run its first try stored. It must still
 * answer `created`, and a different enqueue of the same id must not: for a caller-given id the
 * nonce tells them apart; a generated id is the call's alone, so it needs none (and its first try
 * does not even look for the run: a try sent again does). The resend is played by a LuaScripts
 * that sends each call twice, as the link does after a lost reply (test/chaos/enqueue-retry.spec.ts
 * loses one for real).
 */
describe('an enqueue sent again after a lost reply', () => {
  let redis: Redis;
  let namespace: string;
  let keys: RedisKeys;
  const settings = { fastPath: false, lockMs: 30_000, compact: false };
  const request = (id?: string) =>
    buildEnqueueRequest({ name: 'resend.wf', attempts: 3 }, { n: 1 }, id === undefined ? {} : { id }, 1 << 20);

  beforeAll(() => {
    redis = rawRedis();
    namespace = uniqueNamespace('resend');
    keys = new RedisKeys('sluice', namespace);
  });
  afterAll(async () => {
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  /** Sends each script call twice, the second try as the link sends a call whose reply was lost. */
  const resending = (scripts: LuaScripts) =>
    ({
      run: async (...args: Parameters<LuaScripts['run']>) => {
        await scripts.run(...args);
        return scripts.run(...args);
      },
    }) as unknown as LuaScripts;

  it('of a generated id: the try sent again answers created, stores no nonce and queues the run once', async () => {
    const scripts = resending(scriptsOn(redis));
    const call = { request: request(), waited: '' };
    expect(await enqueueRun(scripts, keys, settings, call)).toEqual({ created: true, state: 'waiting' });
    expect(await redis.hexists(keys.run(call.request.id), 'nonce')).toBe(0);
    expect(await redis.llen(keys.lane('resend.wf', undefined, 'queue'))).toBe(1);

    const runs = [request(), request()];
    expect(await enqueueChunk(scripts, keys, settings, { workflow: 'resend.wf', runs })).toEqual([true, true]);
    expect(await redis.llen(keys.lane('resend.wf', undefined, 'queue'))).toBe(3);
  });

  it('of a caller-given id: the try sent again answers created, a second enqueue of that id does not', async () => {
    const scripts = scriptsOn(redis);
    const call = { request: request(`given-${namespace}`), waited: '' };
    expect(await enqueueRun(resending(scripts), keys, settings, call)).toEqual({ created: true, state: 'waiting' });
    expect(await redis.hexists(keys.run(call.request.id), 'nonce')).toBe(1);
    expect(await enqueueRun(scripts, keys, settings, call)).toEqual({ created: false, state: 'waiting' });
  });
});
