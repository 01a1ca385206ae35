import type Redis from 'ioredis';
import { RunContext, SluiceError, WaitTimeoutError, Workflow, WorkflowFailedError } from '../../lib';
import { INBOX_FIRST_READ_MS } from '../../lib/client/run.waiter';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { channelSubscribers } from '../support/pubsub';
import { rejection } from '../support/rejection';
import { waitParked, watchLane } from '../support/queue-state';
import { Gates, monitorCommands, pollUntil } from '../support/workflows';
import { SluiceServices } from '../../lib/sluice.services';

/**
 * run() on its process's inbox (lib/client/run.inbox.ts): one channel per process, subscribed by
 * the first run() and kept; the enqueue names it, and the run's end is announced there with its
 * outcome. So a run() costs its enqueue only — and an idle worker's round trip is the enqueue
 * that hands it the run, the blocking read that returns it, and the complete call that stores
 * the outcome, announces it and parks the worker again (see ParkAnnouncer.defer).
 */
const gates = new Gates();
const begun = new Gates();

@Workflow('inbox.echo')
class EchoWorkflow {
  run(input: { value: number }): { doubled: number } {
    return { doubled: input.value * 2 };
  }
}

@Workflow('inbox.fail', { attempts: 1 })
class FailWorkflow {
  run(input: { reason: string }): never {
    throw new Error(input.reason);
  }
}

@Workflow('inbox.gate')
class GateWorkflow {
  async run(input: { key: string }, _ctx: RunContext): Promise<string> {
    begun.open(input.key);
    await gates.get(input.key).promise;
    return `opened ${input.key}`;
  }
}

const unique = (label: string) => `${label}-${Math.random().toString(36).slice(2)}`;

describe('run() on the inbox', () => {
  let redis: Redis;
  let apps: TestApp[] = [];
  const namespaces: string[] = [];

  beforeAll(() => void (redis = rawRedis()));
  afterEach(async () => {
    gates.openAll();
    await Promise.all(apps.map((app) => app.close()));
    apps = [];
  });
  afterAll(async () => {
    for (const namespace of namespaces) await dropNamespace(redis, namespace);
    await redis.quit();
  });

  /**
   * A worker app (it also calls run()) in a fresh namespace, its inbox subscribed. `apart`: the
   * worker is another app (another process's, as far as Redis can tell), so its completions reach
   * this app's run() only as announcements on the inbox (a worker tells its own app's waits
   * itself: see LocalWaits).
   */
  async function open(options: { concurrency?: number; apart?: boolean } = {}) {
    const namespace = uniqueNamespace('inbox');
    namespaces.push(namespace);
    const workflows = [EchoWorkflow, FailWorkflow, GateWorkflow];
    const worker = { concurrency: options.concurrency ?? 4 };
    if (options.apart) apps.push(await createApp(workflows, { namespace, worker }));
    const t = await createApp(workflows, { namespace, worker: options.apart ? { enabled: false } : worker });
    apps.push(t);
    const keys = new RedisKeys('sluice', namespace);
    const inbox = t.app.get(SluiceServices).waiter.inboxChannel;
    // The first run() waits on its run's done channel and subscribes the inbox for the next ones.
    expect(await t.client.run(EchoWorkflow, { value: 1 }, { timeoutMs: 10_000 })).toEqual({ doubled: 2 });
    await pollUntil(
      () => channelSubscribers(redis, inbox),
      (n) => n === 1,
      'the inbox subscribed',
    );
    return { t, keys, namespace, inbox };
  }

  it('costs the enqueue alone: no subscribe, read or unsubscribe; an idle worker needs no park call', async () => {
    const { t, keys, namespace } = await open();
    await waitParked(redis, keys, 'inbox.echo');
    const monitor = await monitorCommands(namespace);
    try {
      // Runs slow enough for a handed-over run's deferred park announcement to lapse (50 ms,
      // HANDOFF_REFRESH_MS in worker.loop.ts: a loaded machine can stall that long) are counted.
      let slow = 0;
      for (let i = 0; i < 10; i++) {
        const started = Date.now();
        expect(await t.client.run(EchoWorkflow, { value: i }, { timeoutMs: 10_000 })).toEqual({ doubled: 2 * i });
        if (Date.now() - started >= 40) slow++;
      }
      const sentinel = unique('sentinel');
      await redis.exists(keys.run(sentinel)); // a command of ours behind theirs
      const commands: string[] = [];
      for (;;) {
        const args = await monitor.next(() => true);
        if (args[0] === 'exists' && args[1] === keys.run(sentinel)) break;
        // What the app sent (MONITOR also shows the commands its scripts ran, with the same keys).
        const sent = args[0] === 'fcall' || args[0] === 'blpop' || /^s?(un)?subscribe$/.test(args[0]);
        if (sent && args.some((arg) => arg.startsWith(keys.base))) {
          commands.push(args[0] === 'fcall' ? args[1].replace(/^sluice_[0-9a-f]+_/, '') : args[0]);
        }
      }
      // A block that timed out just before MONITOR started leaves the tail of its idle cycle
      // (reserve, park, block) ahead of the first enqueue: at most one cycle, in that order.
      const firstEnqueue = commands.indexOf('enqueue');
      const idleTail = commands.splice(0, firstEnqueue);
      expect(idleTail).toEqual(['reserve', 'park', 'blpop'].slice(3 - idleTail.length));
      const count = (name: string) => commands.filter((c) => c === name).length;
      expect(count('enqueue')).toBe(10);
      expect(count('complete')).toBe(10);
      for (const absent of ['subscribe', 'ssubscribe', 'unsubscribe', 'sunsubscribe', 'watch']) expect(count(absent)).toBe(0);
      // Each run: handed over by its enqueue on the worker's handoff channel, the worker's
      // blocking read left under way; the complete call parks the worker again. Only a block that
      // timed out meanwhile (every 5 s) brings a reserve, then a park call and a block of their
      // own; and only a run still going when its deferral lapsed, a park call of the blocked worker.
      const timeouts = count('reserve');
      const lapsed = count('park') - timeouts;
      expect(lapsed).toBeGreaterThanOrEqual(0);
      expect(lapsed).toBeLessThanOrEqual(slow);
      expect(count('blpop')).toBe(timeouts);
      expect(commands).toHaveLength(20 + 3 * timeouts + lapsed);
    } finally {
      await monitor.close();
    }
  });

  it("runs that fail or time out reject as on the run's channel; the timed-out run carries on", async () => {
    const { t } = await open();
    const failed = await rejection(() => t.client.run(FailWorkflow, { reason: 'no luck' }, { timeoutMs: 10_000 }));
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect((failed as WorkflowFailedError).message).toContain('no luck');
    const key = unique('slow');
    const error = await rejection(() => t.client.run(GateWorkflow, { key }, { timeoutMs: 200 }));
    expect(error).toBeInstanceOf(WaitTimeoutError);
    const runId = (error as WaitTimeoutError).runId;
    expect(runId).toEqual(expect.any(String));
    gates.open(key);
    expect(await t.client.wait(runId, { timeoutMs: 10_000 })).toBe(`opened ${key}`);
  });

  it("run() of an id that exists (another caller's run) waits on that run's done channel", async () => {
    const { t, keys } = await open();
    const id = unique('shared');
    const key = unique('shared-gate');
    const handle = await t.client.enqueue(GateWorkflow, { key }, { id });
    await begun.get(key).promise;
    const result = t.client.run(GateWorkflow, { key: 'ignored' }, { id, timeoutMs: 10_000 });
    // The wait subscribes, then asks for the announcement there (watch.lua sets 'waited'): the
    // second is what shows both happened.
    await pollUntil(
      () => redis.hget(keys.run(id), 'waited'),
      (waited) => waited === '1',
      "the run's done channel asked for",
    );
    expect(await channelSubscribers(redis, keys.done(id))).toBe(1);
    gates.open(key);
    expect(await result).toBe(`opened ${key}`);
    expect(handle.created).toBe(true);
  });

  it('an announcement that never comes (an older worker, or one lost): the wait reads the run after INBOX_FIRST_READ_MS and resolves', async () => {
    const { t, keys, inbox } = await open({ apart: true });
    const id = unique('unannounced');
    const key = unique('unannounced-gate');
    const result = t.client.run(GateWorkflow, { key }, { id, timeoutMs: 20_000 });
    await begun.get(key).promise;
    // As a worker of an older version finishes it: it announces nothing on an inbox.
    expect(await redis.hget(keys.run(id), 'waited')).toBe(inbox.slice(inbox.lastIndexOf(':') + 1));
    await redis.hset(keys.run(id), 'waited', 'some-other-inbox');
    const started = Date.now();
    gates.open(key);
    expect(await result).toBe(`opened ${key}`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(INBOX_FIRST_READ_MS - 100);
    expect(Date.now() - started).toBeLessThan(INBOX_FIRST_READ_MS + 5_000);
  });

  it('the read after INBOX_FIRST_READ_MS moves the announcement to the done channel, which a run still going then uses', async () => {
    const { t, keys } = await open();
    const id = unique('long');
    const key = unique('long-gate');
    const result = t.client.run(GateWorkflow, { key }, { id, timeoutMs: 20_000 });
    await begun.get(key).promise;
    // The wait read the run (still active) and asked for the done channel only (older workers publish for '1' alone).
    await pollUntil(
      () => redis.hget(keys.run(id), 'waited'),
      (waited) => waited === '1',
      'the done channel asked for',
      INBOX_FIRST_READ_MS + 5_000,
    );
    expect(await channelSubscribers(redis, keys.done(id))).toBe(1);
    gates.open(key);
    expect(await result).toBe(`opened ${key}`);
    await pollUntil(
      () => channelSubscribers(redis, keys.done(id)),
      (n) => n === 0,
      'the done channel unsubscribed',
    );
  });

  it('a handed-over run still going after a few ms: the blocked worker announces itself again, so the next run is handed over too', async () => {
    const { t, keys } = await open({ concurrency: 4 });
    await waitParked(redis, keys, 'inbox.gate');
    const key = unique('held');
    const held = t.client.run(GateWorkflow, { key }, { timeoutMs: 10_000 });
    await begun.get(key).promise;
    // The enqueue took the worker's announcement; its complete call has not come: the worker makes one.
    await waitParked(redis, keys, 'inbox.gate');
    const lane = await watchLane(redis, keys, 'inbox.echo');
    expect(await t.client.run(EchoWorkflow, { value: 21 }, { timeoutMs: 10_000 })).toEqual({ doubled: 42 });
    expect(await lane.writes()).toEqual([]); // handed over, never queued
    gates.open(key);
    expect(await held).toBe(`opened ${key}`);
  });

  it('a shutdown abandons an inbox wait with a SluiceError naming the run, which carries on', async () => {
    const { t, keys } = await open();
    const key = unique('abandoned');
    const result = rejection(() => t.client.run(GateWorkflow, { key }, { timeoutMs: 10_000 }));
    await begun.get(key).promise;
    const closing = t.close();
    const error = await result;
    expect(error).toBeInstanceOf(SluiceError);
    const runId = (error as SluiceError).runId!;
    expect(await redis.hget(keys.run(runId), 'state')).toBe('active');
    gates.open(key);
    await closing;
  });
});
