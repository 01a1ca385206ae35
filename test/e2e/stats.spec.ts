import type Redis from 'ioredis';
import { NonRetryableError, QueueStats, UnknownWorkflowError, Workflow, WorkflowFailedError } from '../../lib';
import { RedisConnections } from '../../lib/redis/redis.connections';
import { dropNamespace, rawRedis, uniqueNamespace } from '../support/app';
import { FlowApp, startFlowApp } from '../support/flow';
import { namespaceNode } from '../support/nodes';
import { enterMonitor, Gates, NO_WAITS, pollUntil } from '../support/workflows';

/**
 * QueueClient.stats: counts per state and active/cap per level (namespace, workflow, default
 * group cap), per group on request, read in one script call without scanning keys.
 */
const gates = new Gates();
const begun = new Gates();

interface Input {
  key: string;
  hold?: boolean;
  fail?: boolean;
}
async function work(input: Input): Promise<string> {
  begun.open(input.key);
  if (input.hold) await gates.get(input.key).promise;
  if (input.fail) throw new NonRetryableError(`${input.key} fails`);
  return input.key;
}
@Workflow('st.w', { concurrency: 5, groupConcurrency: 2 })
class StW {
  run(input: Input) {
    return work(input);
  }
}
@Workflow('st.other')
class StOther {
  run(input: Input) {
    return work(input);
  }
}

describe('client.stats', () => {
  const ns = uniqueNamespace('stats');
  let redis: Redis;
  let app: FlowApp;

  beforeAll(async () => {
    redis = rawRedis();
    app = await startFlowApp([StW, StOther], { namespace: ns, concurrency: 8, worker: { concurrency: 10 } });
  });
  afterAll(async () => {
    gates.openAll();
    await app.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  /** Enqueues a held run and resolves once it executes. */
  async function started(workflow: typeof StW | typeof StOther, key: string, group?: string) {
    const handle = await app.client.enqueue(workflow, { key, hold: true }, { group });
    await begun.get(key).promise;
    return handle;
  }

  it('counts every state and level as the test left them, per group on request, and drains to zero', async () => {
    const { client } = app;
    const empty = {
      waiting: 0,
      delayed: 0,
      active: 0,
      completed: 0,
      failed: 0,
      cancelled: 0,
      paused: false,
      rateLimit: null,
      groupRateLimit: null,
      ...NO_WAITS,
    };
    expect(await client.stats()).toEqual({
      namespace: { active: 0, limit: 8 },
      workflows: { 'st.other': { ...empty, limit: null, groupLimit: null }, 'st.w': { ...empty, limit: 5, groupLimit: 2 } },
    });

    expect(await client.run(StW, { key: 'c1' }, { timeoutMs: 10_000 })).toBe('c1');
    await expect(client.run(StW, { key: 'f1', fail: true }, { timeoutMs: 10_000 })).rejects.toBeInstanceOf(WorkflowFailedError);
    expect(await client.run(StOther, { key: 'o1' }, { timeoutMs: 10_000 })).toBe('o1');

    const held = [await started(StW, 'a1', 'g1'), await started(StW, 'a2', 'g1')];
    const a3 = await client.enqueue(StW, { key: 'a3', hold: true }, { group: 'g1' }); // g1 is at its cap of 2
    held.push(await started(StW, 'b1', 'g2'), await started(StW, 'u1'), await started(StW, 'u2'));
    const u3 = await client.enqueue(StW, { key: 'u3', hold: true }); // the workflow is at its cap of 5
    const b2 = await client.enqueue(StW, { key: 'b2', hold: true }, { group: 'g2' }); // g2 has room, the workflow not
    held.push(await started(StOther, 'o2'));
    await client.enqueue(StW, { key: 'd1' }, { delayMs: '60s' });
    await client.enqueue(StW, { key: 'd2' }, { delayMs: '60s', group: 'g3' });
    expect(await client.setLimits({ workflow: 'st.w', group: 'g2', limit: 3 })).toBeNull();
    for (const h of [a3, u3, b2]) expect((await client.get(h.id))?.state).toBe('waiting');

    expect(await client.stats()).toEqual({
      namespace: { active: 6, limit: 8 },
      workflows: {
        'st.w': {
          waiting: 3,
          delayed: 2,
          active: 5,
          limit: 5,
          groupLimit: 2,
          completed: 1,
          failed: 1,
          cancelled: 0,
          paused: false,
          rateLimit: null,
          groupRateLimit: null,
          ...NO_WAITS,
        },
        'st.other': {
          waiting: 0,
          delayed: 0,
          active: 1,
          limit: null,
          groupLimit: null,
          completed: 1,
          failed: 0,
          cancelled: 0,
          paused: false,
          rateLimit: null,
          groupRateLimit: null,
          ...NO_WAITS,
        },
      },
    });
    // One workflow, with its groups: g3 has only a delayed run, so it is not listed.
    expect(await client.stats({ workflow: StW, groups: true })).toEqual({
      namespace: { active: 6, limit: 8 },
      workflows: {
        'st.w': {
          waiting: 3,
          delayed: 2,
          active: 5,
          limit: 5,
          groupLimit: 2,
          completed: 1,
          failed: 1,
          cancelled: 0,
          paused: false,
          rateLimit: null,
          groupRateLimit: null,
          ...NO_WAITS,
          groups: {
            g1: { waiting: 1, active: 2, limit: 2, paused: false, rateLimit: null },
            g2: { waiting: 1, active: 1, limit: 3, paused: false, rateLimit: null },
          },
        },
      },
    });
    expect((await client.stats({ workflow: 'st.other', groups: true })).workflows).toEqual({
      'st.other': {
        waiting: 0,
        delayed: 0,
        active: 1,
        limit: null,
        groupLimit: null,
        completed: 1,
        failed: 0,
        cancelled: 0,
        paused: false,
        rateLimit: null,
        groupRateLimit: null,
        groups: {},
        ...NO_WAITS,
      },
    });
    await expect(client.stats({ workflow: 'st.nope' })).rejects.toBeInstanceOf(UnknownWorkflowError);

    ['a1', 'a2', 'a3', 'b1', 'b2', 'u1', 'u2', 'u3', 'o2'].forEach((key) => gates.open(key));
    await Promise.all([...held, a3, u3, b2].map((h) => h.result({ timeoutMs: 10_000 })));
    // The last completion's slot is released in the same call that announced it.
    expect(await client.stats({ groups: true })).toEqual({
      namespace: { active: 0, limit: 8 },
      workflows: {
        'st.w': {
          waiting: 0,
          delayed: 2,
          active: 0,
          limit: 5,
          groupLimit: 2,
          completed: 9,
          failed: 1,
          cancelled: 0,
          paused: false,
          rateLimit: null,
          groupRateLimit: null,
          groups: {},
          ...NO_WAITS,
        },
        'st.other': {
          waiting: 0,
          delayed: 0,
          active: 0,
          limit: null,
          groupLimit: null,
          completed: 2,
          failed: 0,
          cancelled: 0,
          paused: false,
          rateLimit: null,
          groupRateLimit: null,
          groups: {},
          ...NO_WAITS,
        },
      },
    } satisfies QueueStats);
  });

  it('issues no SCAN or KEYS: one script call that counts', async () => {
    // A producer: its connection carries nothing but this test's calls (a worker's would also park and reserve).
    const producer = await startFlowApp([StW, StOther], { namespace: ns, worker: { enabled: false } });
    const command = producer.app.get(RedisConnections).command;
    const addr = /addr=(\S+)/.exec(String(await command.call('info', (redis) => redis.client('INFO'))))?.[1];
    expect(addr).toBeDefined();
    const watcher = rawRedis();
    const monitor = await enterMonitor(await namespaceNode(watcher, ns)); // tolerates ioredis' MONITOR start-up race on a busy server
    const seen: Array<{ command: string; args: string[]; source: string }> = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      seen.push({ command: String(args[0]).toLowerCase(), args: args.slice(1).map(String), source });
    });
    try {
      expect((await producer.client.stats({ groups: true })).namespace).toEqual({ active: 0, limit: 8 });
      await command.call('echo', (redis) => redis.echo('stats-done')); // same connection: monitored after the stats call
      await pollUntil(
        async () => seen.some((c) => c.command === 'echo' && c.args[0] === 'stats-done'),
        Boolean,
        'the sentinel to be monitored',
      );
    } finally {
      monitor.disconnect();
      watcher.disconnect();
      await producer.close();
    }
    // This app's commands, and commands run by scripts (no script of this library scans).
    const window = seen.slice(0, seen.findIndex((c) => c.command === 'echo' && c.args[0] === 'stats-done') + 1);
    const ours = window.filter((c) => c.source === addr || c.source === 'lua');
    expect(ours.filter((c) => c.source === addr).map((c) => c.command)).toEqual(['fcall', 'echo']);
    expect(ours.some((c) => c.source === 'lua' && c.args.includes(`{sluice:${ns}}:limits`))).toBe(true); // the script's reads were seen
    expect(ours.filter((c) => ['scan', 'keys', 'hscan', 'sscan', 'zscan'].includes(c.command))).toEqual([]);
  });
});
