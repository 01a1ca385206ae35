import type Redis from 'ioredis';
import { RunContext, RunNotFoundError, Workflow, WorkflowFailedError } from '../../lib';
import { INBOX_FIRST_READ_MS } from '../../lib/client/run.waiter';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { channelSubscribers } from '../support/pubsub';
import { rejection } from '../support/rejection';
import { commandsBefore, Gates, monitorCommands, pollUntil } from '../support/workflows';
import { SluiceServices } from '../../lib/sluice.services';

/**
 * wait() (and a handle's result()) over its process's inbox (lib/client/run.inbox.ts), once that is
 * subscribed: the read of the record (lua/watch.lua) adds the inbox to the run's waiters, so the
 * wait is that one call — no subscribe and unsubscribe of the run's done channel.
 */
const gates = new Gates();
const begun = new Gates();

@Workflow('wait-inbox.gate')
class GateWorkflow {
  async run(input: { key: string }, _ctx: RunContext): Promise<string> {
    begun.open(input.key);
    await gates.get(input.key).promise;
    return `opened ${input.key}`;
  }
}

@Workflow('wait-inbox.fail', { attempts: 1 })
class FailWorkflow {
  async run(input: { key: string }): Promise<never> {
    await gates.get(input.key).promise;
    throw new Error(`failed ${input.key}`);
  }
}

const unique = (label: string) => `${label}-${Math.random().toString(36).slice(2)}`;

describe('wait() on the inbox', () => {
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
   * A producer app with its inbox subscribed (the first wait() asks for it and waits on the done
   * channel) and, unless `local`, a worker app of its own — another process, as far as Redis can
   * tell, so its completions reach the producer only as announcements.
   */
  async function open(options: { local?: boolean } = {}) {
    const namespace = uniqueNamespace('waitinbox');
    namespaces.push(namespace);
    const workflows = [GateWorkflow, FailWorkflow];
    if (!options.local) apps.push(await createApp(workflows, { namespace }));
    const t = await createApp(workflows, { namespace, worker: { enabled: !!options.local } });
    apps.push(t);
    const keys = new RedisKeys('sluice', namespace);
    const inbox = t.app.get(SluiceServices).waiter.inboxChannel;
    const inboxId = inbox.slice(inbox.lastIndexOf(':') + 1);
    const key = unique('first');
    const first = await t.client.enqueue(GateWorkflow, { key });
    const firstResult = first.result({ timeoutMs: 10_000 });
    gates.open(key);
    expect(await firstResult).toBe(`opened ${key}`);
    await pollUntil(
      () => channelSubscribers(redis, inbox),
      (n) => n === 1,
      'the inbox subscribed',
    );
    return { t, keys, namespace, inboxId };
  }

  /** Resolves once the run's waiters (its 'waited' field) are `expected`. */
  function waitersAre(keys: RedisKeys, runId: string, expected: string, what: string): Promise<unknown> {
    return pollUntil(
      () => redis.hget(keys.run(runId), 'waited'),
      (waited) => waited === expected,
      what,
    );
  }

  /** What the app sent while `action` ran: script calls by name, and (un)subscribes. */
  async function sentDuring(namespace: string, keys: RedisKeys, action: () => Promise<void>): Promise<string[]> {
    const monitor = await monitorCommands(namespace);
    try {
      await action();
      const seen = await commandsBefore(monitor, redis, keys.run(unique('sentinel')));
      return seen
        .filter((args) => (args as { source?: string }).source !== 'lua')
        .filter((args) => args[0] === 'fcall' || /^s?(un)?subscribe$/.test(args[0]))
        .filter((args) => args.some((arg) => arg.startsWith(keys.base)))
        .map((args) => (args[0] === 'fcall' ? args[1].replace(/^sluice_[0-9a-f]+_/, '') : args[0]));
    } finally {
      await monitor.close();
    }
  }

  it("a run going: the wait is one read, which names the inbox among the run's waiters; the announcement resolves it", async () => {
    const { t, keys, namespace, inboxId } = await open();
    const key = unique('going');
    const handle = await t.client.enqueue(GateWorkflow, { key });
    await begun.get(key).promise;
    let result!: Promise<string>;
    const sent = await sentDuring(namespace, keys, async () => {
      result = handle.result({ timeoutMs: 10_000 });
      await waitersAre(keys, handle.id, inboxId, 'the inbox named');
      gates.open(key);
      expect(await result).toBe(`opened ${key}`);
    });
    // The worker app's calls (reserve, complete, park…) aside: the producer's.
    expect(sent.filter((name) => name === 'watch' || name.endsWith('subscribe'))).toEqual(['watch']);
    expect(await channelSubscribers(redis, keys.done(handle.id))).toBe(0);
  });

  it('another waiter on the done channel is kept: both hear the end', async () => {
    const { t, keys, namespace, inboxId } = await open();
    const other = await createApp([GateWorkflow, FailWorkflow], { namespace, worker: { enabled: false } });
    apps.push(other);
    const key = unique('shared');
    const handle = await t.client.enqueue(GateWorkflow, { key });
    await begun.get(key).promise;
    // The other app's inbox is not subscribed yet: its wait goes over the done channel ('1').
    const theirs = other.client.wait(handle.id, { timeoutMs: 10_000 });
    await waitersAre(keys, handle.id, '1', 'the done channel named');
    const ours = t.client.wait(handle.id, { timeoutMs: 10_000 });
    await waitersAre(keys, handle.id, `1 ${inboxId}`, 'the inbox named beside it');
    gates.open(key);
    expect(await Promise.all([ours, theirs])).toEqual([`opened ${key}`, `opened ${key}`]);
  });

  it('a run that finished resolves from the read, which writes nothing; a failed one rejects; a missing one is not found', async () => {
    const { t, keys } = await open();
    const key = unique('done');
    const handle = await t.client.enqueue(GateWorkflow, { key });
    gates.open(key);
    expect(await handle.result({ timeoutMs: 10_000 })).toBe(`opened ${key}`);
    const waitedBefore = await redis.hget(keys.run(handle.id), 'waited');
    expect(await t.client.wait(handle.id, { timeoutMs: 10_000 })).toBe(`opened ${key}`);
    expect(await redis.hget(keys.run(handle.id), 'waited')).toBe(waitedBefore);

    const failKey = unique('fail');
    const failing = await t.client.enqueue(FailWorkflow, { key: failKey });
    const failed = rejection(() => failing.result({ timeoutMs: 10_000 }));
    gates.open(failKey);
    const error = await failed;
    expect(error).toBeInstanceOf(WorkflowFailedError);
    expect((error as Error).message).toContain(`failed ${failKey}`);

    expect(await rejection(() => t.client.wait(unique('missing'), { timeoutMs: 1_000 }))).toBeInstanceOf(RunNotFoundError);
  });

  it("in the worker's own app the worker tells the wait itself: nothing is published", async () => {
    const { t, keys, namespace, inboxId } = await open({ local: true });
    const key = unique('local');
    const handle = await t.client.enqueue(GateWorkflow, { key });
    await begun.get(key).promise;
    const monitor = await monitorCommands(namespace);
    try {
      const result = handle.result({ timeoutMs: 10_000 });
      await waitersAre(keys, handle.id, inboxId, 'the inbox named');
      gates.open(key);
      expect(await result).toBe(`opened ${key}`);
      const seen = await commandsBefore(monitor, redis, keys.run(unique('sentinel')));
      // This namespace's channels only: other specs' apps publish on the same server meanwhile.
      expect(seen.filter((args) => /^s?publish$/.test(args[0]) && args[1].startsWith(keys.base))).toEqual([]);
    } finally {
      await monitor.close();
    }
  });

  it('a wait with onProgress still goes over the done channel', async () => {
    const { t, keys } = await open();
    const key = unique('progress');
    const handle = await t.client.enqueue(GateWorkflow, { key });
    await begun.get(key).promise;
    const result = t.client.wait(handle.id, { timeoutMs: 10_000, onProgress: () => undefined });
    await pollUntil(
      () => channelSubscribers(redis, keys.done(handle.id)),
      (n) => n === 1,
      'the done channel subscribed',
    );
    gates.open(key);
    expect(await result).toBe(`opened ${key}`);
  });

  it('an announcement that never comes (an older worker): the wait reads the run after INBOX_FIRST_READ_MS and resolves', async () => {
    const { t, keys, inboxId } = await open();
    const key = unique('unannounced');
    const handle = await t.client.enqueue(GateWorkflow, { key });
    await begun.get(key).promise;
    const result = handle.result({ timeoutMs: 20_000 });
    await waitersAre(keys, handle.id, inboxId, 'the inbox named');
    // As a worker of an older version finishes it: it announces nothing on an inbox.
    await redis.hset(keys.run(handle.id), 'waited', 'some-other-inbox');
    const started = Date.now();
    gates.open(key);
    expect(await result).toBe(`opened ${key}`);
    expect(Date.now() - started).toBeLessThan(INBOX_FIRST_READ_MS + 5_000);
  });
});
