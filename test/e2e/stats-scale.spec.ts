import IORedis from 'ioredis';
import type Redis from 'ioredis';
import { Workflow } from '../../lib';
import { MAX_GROUP_ROWS } from '../../lib/interfaces/queue.stats';
import { SluiceServices } from '../../lib/sluice.services';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { uniqueNamespace } from '../support/app';
import { FlowApp, startFlowApp, within } from '../support/flow';
import { LocalRedis, startRedisServer } from '../support/redis-server';
import { Gates, NO_WAITS } from '../support/workflows';

/**
 * stats and a change of every group's default cap with many groups: the Redis work of each script
 * call stays bounded however many groups a workflow has. Measured as commands (the sum of
 * `INFO commandstats` calls, which counts the commands scripts run, read before and after each
 * script call), never as time. The file runs its own redis-server so that no other test file's
 * commands land in those counts.
 */
const GROUPS = 20_000;
const UNGROUPED = 5;
/** Groups one activate-groups call visits (GROUP_BATCH in lua/includes/groups.lua; SSCAN may return a few more). */
const GROUP_BATCH = 500;

@Workflow('scale.w', { groupConcurrency: 1 })
class ScaleW {
  run() {}
}

const gates = new Gates();
const begun = new Gates();
@Workflow('scale.gate', { groupConcurrency: 1 })
class GateW {
  async run(input: { key: string }) {
    begun.open(input.key);
    await gates.get(input.key).promise;
    return input.key;
  }
}

/** Commands the clients send themselves; every other command counted was run by a script. */
const CLIENT_COMMANDS = new Set([
  'info',
  'eval',
  'evalsha',
  'eval_ro',
  'evalsha_ro',
  'script',
  'fcall',
  'fcall_ro',
  'function',
  'ping',
  'client',
  'hello',
  'select',
  'echo',
]);

async function scriptRunCommands(admin: Redis): Promise<number> {
  let sum = 0;
  for (const [, name, calls] of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (!CLIENT_COMMANDS.has(name.split('|')[0])) sum += Number(calls);
  }
  return sum;
}

interface ScriptCall {
  name: string;
  commands: number;
}

/** Records the commands each script call of `app` runs, until `restore()`. The app must be the server's only busy client. */
function countScriptCommands(app: FlowApp, admin: Redis): { calls: ScriptCall[]; restore(): void } {
  const scripts = app.app.get(SluiceServices).scripts.get();
  const run = scripts.run.bind(scripts) as (...args: unknown[]) => Promise<unknown>;
  const calls: ScriptCall[] = [];
  const spy = jest.spyOn(scripts, 'run').mockImplementation(async (...args: unknown[]) => {
    const before = await scriptRunCommands(admin);
    const reply = await run(...args);
    calls.push({ name: String(args[0]), commands: (await scriptRunCommands(admin)) - before });
    return reply;
  });
  return { calls, restore: () => spy.mockRestore() };
}

describe('stats and group-cap changes with 20,000 groups', () => {
  const ns = uniqueNamespace('scale');
  const keys = new RedisKeys('sluice', ns);
  const statsKey = keys.workflow('scale.w', 'stats');
  let server: LocalRedis;
  let admin: Redis;
  let producer: FlowApp;
  const apps: FlowApp[] = [];

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new IORedis(server.url);
    const connection = { url: server.url };
    // A worker's bootstrap registers the workflow (and marks its count of due grouped runs exact:
    // it has no group yet). It stops before any run exists, so every run below stays due.
    const boot = await startFlowApp([ScaleW], { namespace: ns, connection });
    await boot.close();
    producer = await startFlowApp([ScaleW, GateW], { namespace: ns, connection, worker: { enabled: false } });
    apps.push(producer);
    for (let from = 0; from < GROUPS; from += 1_000) {
      await producer.client.enqueueMany(
        ScaleW,
        Array.from({ length: 1_000 }, (_, i) => ({ input: {}, opts: { group: `g${from + i}` } })),
      );
    }
    await producer.client.enqueueMany(
      ScaleW,
      Array.from({ length: UNGROUPED }, () => ({ input: {} })),
    );
    expect(await admin.scard(keys.workflow('scale.w', 'groups'))).toBe(GROUPS);
  }, 120_000);

  afterAll(async () => {
    gates.openAll();
    await Promise.all(apps.map((app) => app.close()));
    admin?.disconnect();
    await server?.stop();
  });

  it('stats() returns the right waiting count in a bounded number of commands', async () => {
    const { calls, restore } = countScriptCommands(producer, admin);
    try {
      expect((await producer.client.stats({ workflow: ScaleW })).workflows).toEqual({
        'scale.w': {
          waiting: GROUPS + UNGROUPED,
          delayed: 0,
          active: 0,
          limit: null,
          groupLimit: 1,
          completed: 0,
          failed: 0,
          cancelled: 0,
          paused: false,
          rateLimit: null,
          groupRateLimit: null,
          ...NO_WAITS,
        },
      });
      expect((await producer.client.stats()).workflows['scale.w'].waiting).toBe(GROUPS + UNGROUPED);
    } finally {
      restore();
    }
    expect(calls.map((call) => call.name)).toEqual(['stats', 'stats']);
    // A handful of reads per workflow; counting the lanes of every group would take 40,000.
    for (const call of calls) expect(call.commands).toBeLessThanOrEqual(20);
  });

  it('stats({ groups: true }) lists at most 1,000 groups, the same ones while the groups stay, and says how many it left out', async () => {
    const { calls, restore } = countScriptCommands(producer, admin);
    const listed: string[][] = [];
    try {
      for (let i = 0; i < 2; i++) {
        // one after the other: each call's count must see only its own commands
        const wf = (await producer.client.stats({ workflow: ScaleW, groups: true })).workflows['scale.w'];
        expect(wf).toMatchObject({ waiting: GROUPS + UNGROUPED, groupsOmitted: GROUPS - MAX_GROUP_ROWS });
        expect(Object.values(wf.groups!).every((g) => g.waiting === 1 && g.active === 0 && g.limit === 1)).toBe(true);
        listed.push(Object.keys(wf.groups!).sort());
      }
    } finally {
      restore();
    }
    expect(listed[0]).toHaveLength(MAX_GROUP_ROWS);
    expect(listed[1]).toEqual(listed[0]);
    // A few reads per listed group (lanes, active set, an override if any), not per group of the workflow.
    for (const call of calls) expect(call.commands).toBeLessThanOrEqual(5 * MAX_GROUP_ROWS);
  });

  it("a raised default ('*') reaches every group, in calls of a bounded number of commands", async () => {
    // As a cap that held every group back would leave them: due runs and room, out of the round-robin.
    await admin.del(keys.workflow('scale.w', 'ready'));
    const { calls, restore } = countScriptCommands(producer, admin);
    try {
      expect(await producer.client.setLimits({ workflow: 'scale.w', group: '*', limit: 2 })).toBe(1);
    } finally {
      restore();
    }
    expect(await admin.zcard(keys.workflow('scale.w', 'ready'))).toBe(GROUPS); // every group rejoined
    expect(calls[0].name).toBe('set-limits');
    expect(calls.slice(1).every((call) => call.name === 'activate-groups')).toBe(true);
    expect(calls.length).toBeGreaterThanOrEqual(GROUPS / (2 * GROUP_BATCH)); // in batches, not in one call
    // About 4 commands per group visited (its round-robin entry, lane and active count, then its
    // return to the round-robin): some 2,000 a call, where one call over every group ran 80,000.
    for (const call of calls) expect(call.commands).toBeLessThanOrEqual(7 * GROUP_BATCH);
    // Lowering the default gives no group room: nothing to visit.
    const lowered = countScriptCommands(producer, admin);
    try {
      expect(await producer.client.setLimits({ workflow: 'scale.w', group: '*', limit: 1 })).toBe(2);
    } finally {
      lowered.restore();
    }
    expect(lowered.calls.map((call) => call.name)).toEqual(['set-limits']);
    expect(lowered.calls[0].commands).toBeLessThanOrEqual(20);
  });

  it('after an upgrade, the first stats() counts the groups once; later calls read the kept count', async () => {
    // Data written before the count existed has no mark, and the new code may have counted part of its runs.
    await admin.hdel(statsKey, 'groupDueExact');
    await admin.hset(statsKey, 'groupDue', 3);
    const { calls, restore } = countScriptCommands(producer, admin);
    try {
      expect((await producer.client.stats({ workflow: ScaleW })).workflows['scale.w'].waiting).toBe(GROUPS + UNGROUPED);
      expect((await producer.client.stats({ workflow: ScaleW })).workflows['scale.w'].waiting).toBe(GROUPS + UNGROUPED);
    } finally {
      restore();
    }
    expect(await admin.hmget(statsKey, 'groupDue', 'groupDueExact')).toEqual([String(GROUPS), '1']);
    expect(calls[0].commands).toBeGreaterThan(GROUPS); // the one-time count
    expect(calls[1].commands).toBeLessThanOrEqual(20);
  });

  it('a raised default group cap lets a group held at its old cap start more runs while its first run is still active', async () => {
    const gateNs = uniqueNamespace('scale-gate');
    const gateKeys = new RedisKeys('sluice', gateNs);
    const app = await startFlowApp([GateW], { namespace: gateNs, connection: { url: server.url }, worker: { concurrency: 5 } });
    apps.push(app);
    const handles = [];
    for (const key of ['h1', 'h2', 'h3']) handles.push(await app.client.enqueue(GateW, { key }, { group: 'g' }));
    await begun.get('h1').promise;
    // Held: one run active at the cap of 1, two due, and the group out of the round-robin.
    expect((await app.client.stats({ workflow: GateW, groups: true })).workflows['scale.gate'].groups).toEqual({
      g: { waiting: 2, active: 1, limit: 1, paused: false, rateLimit: null },
    });
    expect(await admin.zscore(gateKeys.workflow('scale.gate', 'ready'), 'g')).toBeNull();

    expect(await app.client.setLimits({ workflow: 'scale.gate', group: '*', limit: 3 })).toBe(1);
    await within(Promise.all([begun.get('h2').promise, begun.get('h3').promise]), 5_000, 'h2 and h3 to start under the raised cap');
    expect((await app.client.get(handles[0].id))?.state).toBe('active'); // h1 never gave up its slot
    expect((await app.client.stats({ workflow: GateW, groups: true })).workflows['scale.gate']).toMatchObject({
      waiting: 0,
      active: 3,
      groups: { g: { waiting: 0, active: 3, limit: 3 } },
    });

    gates.openAll();
    expect(await Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })))).toEqual(['h1', 'h2', 'h3']);
    expect(await admin.hget(gateKeys.workflow('scale.gate', 'stats'), 'groupDue')).toBe('0');
  });
});
