import type Redis from 'ioredis';
import { newCallId } from '../../lib/redis/commands/call-id';
import { parseReserveReply } from '../../lib/redis/commands/reserve.command';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { dropNamespace, rawRedis, uniqueNamespace } from '../support/app';
import { isCluster } from '../support/nodes';
import { listenToChannels } from '../support/pubsub';
import { enqueueArgs, enqueueKeys } from '../support/queue-state';
import { scriptsOn } from '../support/scripts';
import { commandsBefore, monitorCommands } from '../support/workflows';

/**
 * lua/complete.lua finishes a plain commit — one run, ungrouped and unlinked, in a namespace
 * without a limits hash — in straight lines, and when nothing is due it stops there. These tests
 * hold it to what the general path writes: the same story told in a namespace whose limits hash
 * holds only a cap of a workflow it never runs (which changes nothing for this one, but sends
 * every commit down the general path) must leave the same data, replies and announcements.
 */
const WF = 'plain.commit';
const WORKER = 'w1:30000';

let redis: Redis;
const namespaces: string[] = [];

beforeAll(() => {
  redis = rawRedis();
});

afterAll(async () => {
  for (const ns of namespaces) await dropNamespace(redis, ns);
  redis.disconnect();
});

function newNamespace(): RedisKeys {
  const ns = uniqueNamespace('plain-commit');
  namespaces.push(ns);
  return new RedisKeys('sluice', ns);
}

/** Fields whose values are times (or made from one): equal in kind, not in value, across two stories. */
const TIMED = new Set(['createdAt', 'dueAt', 'startedAt', 'finishedAt', 'token']);

function untimed(record: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(record).map(([field, value]) => [field, TIMED.has(field) ? 'time' : value]));
}

async function claim(keys: RedisKeys, wanted: number) {
  const scripts = scriptsOn(redis);
  const reply = await scripts.run<unknown[]>(
    'reserve',
    [keys.stallGate, keys.call(newCallId())],
    [keys.base, wanted, 30_000, 0, 3, 256, 60_000, 'w', 0, 0, WF],
  );
  return parseReserveReply(reply).claims;
}

function complete(keys: RedisKeys, wanted: number, runs: Array<[id: string, token: string, result: string, journal: string]>) {
  return scriptsOn(redis).run<unknown>(
    'complete',
    [keys.call(newCallId())],
    [keys.base, 60_000, wanted, 30_000, 0, WORKER, 5_000, '', 1, WF, 0, ...runs.flat()],
  );
}

/**
 * Enqueues `runs` runs (the first waited on), claims the first, and commits it asking for one more:
 * with one run it parks, with more it claims the next. Returns what a reader could tell apart.
 */
async function story(keys: RedisKeys, runs: number) {
  const scripts = scriptsOn(redis);
  for (let i = 1; i <= runs; i++) {
    await scripts.run('enqueue', enqueueKeys(keys, `r${i}`), enqueueArgs(keys, WF, `r${i}`, { i }, false, 30_000, i === 1));
  }
  const [first] = await claim(keys, 1);
  const channel = keys.done('r1');
  const listener = await listenToChannels(redis, `${keys.base}done:*`, [channel]);
  const reply = await complete(keys, 1, [['r1', first.token, '"done"', '0 {"steps":1}']]);
  await listener.close();
  return {
    reply: typeof reply === 'string' ? reply : (reply as unknown[]).map((item, i) => (i === 6 ? 'token' : item)),
    record: untimed(await redis.hgetall(keys.run('r1'))),
    expires: (await redis.pttl(keys.run('r1'))) > 0,
    leases: await redis.zrange(keys.leases, 0, -1),
    active: await redis.smembers(keys.workflow(WF, 'active')),
    stats: await redis.hgetall(keys.workflow(WF, 'stats')),
    parked: await redis.zrange(keys.workflow(WF, 'parked'), 0, -1),
    queue: await redis.lrange(keys.lane(WF, undefined, 'queue'), 0, -1),
    heard: listener.heard.map((heard) => heard === channel && 'done:r1'),
    messages: listener.messages,
  };
}

/**
 * Tells the story in a plain namespace (watched with MONITOR, off a cluster) and in one whose
 * limits hash sends it down the general path, and expects them to tell the same.
 */
async function tellBoth(runs: number) {
  const plain = newNamespace();
  const general = newNamespace();
  await redis.hset(general.limits, 'wf:elsewhere', '5');
  const monitor = isCluster(redis) ? undefined : await monitorCommands();
  const told = await story(plain, runs);
  const seen = monitor ? await commandsBefore(monitor, redis, `${plain.base}sentinel`) : undefined;
  await monitor?.close();
  expect(told).toEqual(await story(general, runs));
  return { plain, told, seen };
}

describe('a plain commit (one run, no limits hash)', () => {
  it('with nothing due, leaves what the general path leaves and parks the worker, in one look for the limits hash and the lanes', async () => {
    const { plain, told, seen } = await tellBoth(1);
    expect(told).toMatchObject({
      reply: '1 1 1 0',
      record: { state: 'completed', result: '"done"', 'tl:0': '1', 'tl:0.0': '{"steps":1}' },
      expires: true,
      leases: [],
      active: [],
      stats: { completed: '1' },
      parked: [WORKER],
      heard: ['done:r1'],
    });
    expect(JSON.parse(told.messages[0])).toMatchObject({ state: 'completed', result: 'done' });
    if (seen) {
      // The complete call's EXISTS: one, naming the limits hash once more than the lane's keys.
      const exists = seen.filter((args) => args[0] === 'exists' && args.includes(plain.limits)).map((args) => [...args]);
      expect(exists.slice(-1)).toEqual([
        [
          'exists',
          ...Array(5).fill(plain.limits),
          ...['queue', 'waiting', 'wake', 'ready'].map((suffix) => `${plain.base}wf:${WF}:${suffix}`),
        ],
      ]);
    }
  });

  it('with runs due, claims the next as the general path does, looking at the lanes once', async () => {
    const { plain, told, seen } = await tellBoth(2);
    expect(told).toMatchObject({ record: { state: 'completed' }, leases: ['r2'], active: ['r2'], parked: [], queue: [] });
    expect(told.reply).toEqual(expect.arrayContaining(['r2']));
    if (seen) {
      const lanes = (args: string[]) => args[0] === 'exists' && args.includes(`${plain.base}wf:${WF}:queue`);
      // From this namespace's complete call on (other files' commands are in the monitor's stream too).
      const afterComplete = seen.slice(
        seen.findIndex((args) => args[0] === 'fcall' && /_complete$/.test(args[1]) && args[3].startsWith(`${plain.base}call:`)),
      );
      expect(afterComplete.filter(lanes)).toHaveLength(1);
    }
  });

  it('whose lease was lost writes nothing, and its resent call after a lost reply answers as the first did', async () => {
    const keys = newNamespace();
    const scripts = scriptsOn(redis);
    await scripts.run('enqueue', enqueueKeys(keys, 'r1'), enqueueArgs(keys, WF, 'r1', {}, false));
    const [first] = await claim(keys, 1);
    expect(await complete(keys, 0, [['r1', `${first.token}0`, '"stale"', '']])).toEqual('0 1 0 0');
    expect(await redis.hget(keys.run('r1'), 'state')).toBe('active');
    expect(await complete(keys, 0, [['r1', first.token, '"done"', '']])).toEqual('0 1 1 0');
    expect(await complete(keys, 0, [['r1', first.token, '"done"', '']])).toEqual('0 1 1 0');
    expect(await redis.hmget(keys.run('r1'), 'state', 'result')).toEqual(['completed', '"done"']);
    expect(await redis.hget(keys.workflow(WF, 'stats'), 'completed')).toBe('1');
  });
});
