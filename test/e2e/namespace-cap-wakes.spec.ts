import IORedis from 'ioredis';
import type Redis from 'ioredis';
import { Workflow } from '../../lib';
import type { LuaScripts } from '../../lib/redis/lua.scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { parseCompleteReply } from '../../lib/redis/commands/complete.command';
import { parseReserveReply } from '../../lib/redis/commands/reserve.command';
import { newCallId } from '../../lib/redis/commands/call-id';
import { uniqueNamespace } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { completions, FlowApp, LiveGauge, startFlowApp, within } from '../support/flow';
import { enqueueArgs, enqueueKeys } from '../support/queue-state';
import { LocalRedis, startRedisServer } from '../support/redis-server';
import { scriptsOn } from '../support/scripts';

/**
 * The namespace cap and the calls that free its slots: a finishing call wakes the workers of the
 * workflows the cap held back (the `ns-waiting` set, lua/includes/slots.lua wakeNamespaceWaiters)
 * in a few commands, however many workflows the namespace has; before, it visited every workflow.
 * Measured as commands (`INFO commandstats`, which counts the commands scripts run), never as
 * time, on a redis-server of the file's own so that no other test file's commands land in them.
 */

/** Commands the client sends itself; every other command counted was run by a script. */
const CLIENT_COMMANDS = new Set(['info', 'eval', 'evalsha', 'script', 'ping', 'client', 'hello', 'select']);

async function scriptRunCommands(admin: Redis): Promise<number> {
  let sum = 0;
  for (const [, name, calls] of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (!CLIENT_COMMANDS.has(name.split('|')[0])) sum += Number(calls);
  }
  return sum;
}

const live = new LiveGauge();
async function held(): Promise<void> {
  live.enter('ns');
  try {
    await new Promise((resolve) => setTimeout(resolve, 2));
  } finally {
    live.leave('ns');
  }
}
@Workflow('nsw.a')
class NswA {
  run() {
    return held();
  }
}
@Workflow('nsw.b')
class NswB {
  run() {
    return held();
  }
}
@Workflow('nsw.c')
class NswC {
  run() {
    return held();
  }
}

describe('the namespace cap, slots freed', () => {
  let server: LocalRedis;
  let admin: Redis;
  let scripts: LuaScripts;

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new IORedis(server.url);
    scripts = scriptsOn(admin);
  });
  afterAll(async () => {
    admin?.disconnect();
    await server?.stop();
  });

  /**
   * A namespace of `count` registered workflows under a namespace cap of 1, one due run each, and
   * the first workflow's run claimed by a worker that runs them all: its claim pass found the cap
   * full, so every other workflow waits for the slot. The wake lists are emptied, so a wake shows.
   */
  async function fullNamespace(count: number) {
    const keys = new RedisKeys('sluice', uniqueNamespace('nsw'));
    const names = Array.from({ length: count }, (_, i) => `w${i}`);
    await scripts.run('declare-limits', [keys.limits, keys.workflows, keys.seq], [keys.base, count, ...names, 'ns', '1', '', '']);
    for (const name of names) await scripts.run('enqueue', enqueueKeys(keys, `${name}-r`), enqueueArgs(keys, name, `${name}-r`, {}, false));
    const reserved = parseReserveReply(
      await scripts.run<unknown[]>(
        'reserve',
        [keys.stallGate, keys.call(newCallId())],
        [keys.base, 64, 30_000, 0, 3, 256, 60_000, 'worker', 0, 0, ...names],
      ),
    );
    expect(reserved.claims.map((claim) => claim.id)).toEqual(['w0-r']);
    await admin.del(...names.map((name) => keys.workflow(name, 'wake')));
    return { keys, names, claim: reserved.claims[0] };
  }

  /** Completes a claimed run (refilling nothing) and returns the commands the call ran. */
  async function complete(keys: RedisKeys, claim: { id: string; token: string; workflow: string }): Promise<number> {
    const before = await scriptRunCommands(admin);
    const reply = parseCompleteReply(
      await scripts.run<unknown[]>(
        'complete',
        [keys.call(newCallId())],
        [keys.base, 60_000, 0, 30_000, 0, '', 5_000, '', 1, claim.workflow, 0, claim.id, claim.token, '"ok"', ''],
      ),
    );
    expect(reply.completed).toEqual([true]);
    return (await scriptRunCommands(admin)) - before;
  }

  /** The workflows whose wake list holds a marker. */
  async function woken(keys: RedisKeys, names: string[]): Promise<string[]> {
    const lengths = await Promise.all(names.map((name) => admin.llen(keys.workflow(name, 'wake'))));
    return names.filter((_, i) => lengths[i] > 0);
  }

  it('a finishing call runs as many commands with 1,000 workflows as with 10, and wakes one worker for the one slot', async () => {
    const small = await fullNamespace(10);
    const smallCommands = await complete(small.keys, small.claim);
    const large = await fullNamespace(1_000);
    const largeCommands = await complete(large.keys, large.claim);
    // Visiting every workflow (SMEMBERS, then a look at each one's lanes) ran 41 and 3,011.
    expect(largeCommands).toBe(smallCommands);
    expect(largeCommands).toBeLessThanOrEqual(20);
    // The slot goes to the workflow that waited longest; the others keep waiting their turn.
    expect(await woken(large.keys, large.names)).toEqual(['w1']);
    expect(await admin.zcard(`${large.keys.base}ns-waiting`)).toBe(1_000 - 2);
  });

  it('no run is stranded: each freed slot wakes the next workflow until every run has run', async () => {
    const { keys, names, claim } = await fullNamespace(50);
    let current = claim;
    for (let turn = 1; turn < names.length; turn++) {
      await complete(keys, current);
      const next = await woken(keys, names);
      expect(next).toEqual([names[turn]]);
      // Its worker wakes and claims the slot.
      await admin.del(keys.workflow(next[0], 'wake'));
      const reserved = parseReserveReply(
        await scripts.run<unknown[]>(
          'reserve',
          [keys.stallGate, keys.call(newCallId())],
          [keys.base, 64, 30_000, 0, 3, 256, 60_000, `worker-${turn}`, 0, 0, next[0]],
        ),
      );
      expect(reserved.claims.map((c) => c.id)).toEqual([`${next[0]}-r`]);
      current = reserved.claims[0];
    }
    await complete(keys, current);
    expect(await woken(keys, names)).toEqual([]);
    expect(await admin.exists(`${keys.base}ns-waiting`)).toBe(0);
    expectConsistent(await auditNamespace(admin, { namespace: keys.namespace }));
  });

  it('workers of different workflows in different apps share the cap: it holds and every run completes', async () => {
    const namespace = uniqueNamespace('nsw-apps');
    const options = { namespace, connection: { url: server.url }, concurrency: 2, worker: { concurrency: 4 } };
    const apps: FlowApp[] = [];
    try {
      for (const wf of [NswA, NswB, NswC]) apps.push(await startFlowApp([wf], options));
      const drained = completions(apps, 3 * 40);
      for (const [i, wf] of [NswA, NswB, NswC].entries())
        await apps[i].client.enqueueMany(
          wf,
          Array.from({ length: 40 }, () => ({ input: {} })),
        );
      await within(drained, 30_000, '120 runs to complete');
      expect(live.max('ns')).toBe(2);
      expectConsistent(await auditNamespace(admin, { namespace }));
    } finally {
      await Promise.all(apps.map((app) => app.close()));
    }
  });
});
