import type { Provider } from '@nestjs/common';
import { RedisConnectionError, RunContext, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import type { QueueClient } from '../../lib';
import { channelSubscribers } from '../support/pubsub';
import { uniqueNamespace } from '../support/app';
import { appOn, proxiedServer } from '../support/fault';
import type { ProxyConnection } from '../support/tcp-proxy';
import { RedisAdmin, sluiceConnectionName } from '../support/redis-process';
import { rejection } from '../support/rejection';
import { Counter, Gates, pollUntil } from '../support/workflows';
import { SluiceServices } from '../../lib/sluice.services';

/**
 * run() against the order in which its replies arrive. The producer reaches Redis through a TCP
 * proxy that holds back or drops what one of its connections receives; the worker connects
 * directly. Covers: a run whose record is deleted by the call that announces it (keep 0) while
 * the announcement is still on its way when the first read answers "no such run"; and the run id
 * on the error of a run() whose wait fails after its enqueue was acknowledged.
 */
jest.setTimeout(60_000);

const gates = new Gates();
const begun = new Gates();
const started = new Counter();

@Workflow('rwr.none', { keep: { completed: 0, failed: 0 }, attempts: 1 })
class KeepNothingWorkflow {
  async run(input: { key: string; hold?: boolean }, _ctx: RunContext): Promise<string> {
    begun.open(input.key);
    if (input.hold) await gates.get(input.key).promise;
    return `done:${input.key}`;
  }
}

@Workflow('rwr.gate')
class GateWorkflow {
  async run(input: { key: string }, _ctx: RunContext): Promise<string> {
    started.inc(input.key);
    begun.open(input.key);
    await gates.get(input.key).promise;
    return `gate:${input.key}`;
  }
}

@Workflow('rwr.plain')
class PlainWorkflow {
  async run(input: { key: string }): Promise<string> {
    return `plain:${input.key}`;
  }
}

describe('run() and the order of its replies', () => {
  const redis = proxiedServer();
  const apps: Array<{ close(): Promise<void> }> = [];
  afterEach(async () => {
    gates.openAll();
    redis.proxy.releaseReplies();
    redis.proxy.restore({ resetTainted: true });
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });

  async function fleet(producerOptions: object = {}, producerProviders: Provider[] = []) {
    const namespace = uniqueNamespace('rwr');
    const worker = await appOn(redis.server.url, [KeepNothingWorkflow, PlainWorkflow, GateWorkflow], {
      namespace,
      worker: { concurrency: 4 },
    });
    apps.push(worker);
    const producer = await appOn(redis.proxy.url, producerProviders, { namespace, worker: { enabled: false }, ...producerOptions });
    apps.push(producer);
    return { namespace, keys: new RedisKeys('sluice', namespace), worker, producer: producer.client, producerApp: producer.app };
  }

  /**
   * Has the producer's first run() subscribe its inbox, so that its next ones wait there (see
   * RunInbox), and confirms the workflow names it will use (their first enqueue asks Redis).
   */
  async function inboxLive(app: { get(type: typeof SluiceServices): SluiceServices }, producer: QueueClient): Promise<void> {
    gates.open('warm');
    expect(await producer.run('rwr.plain', { key: 'warm' })).toBe('plain:warm');
    for (const name of ['rwr.none', 'rwr.gate']) await producer.enqueue(name, { key: 'warm' });
    const inbox = app.get(SluiceServices).waiter.inboxChannel;
    await pollUntil(
      () => channelSubscribers(redis.raw, inbox),
      (n) => n === 1,
      'the inbox subscribed',
    );
  }

  /** Matches the producer's proxied connection of that role (the worker's do not pass the proxy). */
  async function producerConnection(namespace: string, role: 'command' | 'subscriber'): Promise<(c: ProxyConnection) => boolean> {
    const proxied = new Set(redis.proxy.connections().map((c) => c.upstreamAddress));
    const addrs = (await new RedisAdmin(redis.raw).clients({ namePrefix: sluiceConnectionName(namespace, role) }))
      .map((c) => c.addr)
      .filter((addr) => proxied.has(addr));
    expect(addrs).toHaveLength(1);
    return (c) => c.upstreamAddress === addrs[0];
  }

  it("keep 0, on the run's done channel: a first read that finds the run gone still resolves with the announcement already sent to the live subscription", async () => {
    const { namespace, keys, producer } = await fleet();
    expect(await producer.run('rwr.none', { key: 'warm' })).toBe('done:warm'); // both connections open, the name confirmed
    const command = await producerConnection(namespace, 'command');
    const subscriber = await producerConnection(namespace, 'subscriber');

    // The enqueue's acknowledgement is held: the first read is sent only once it is released.
    // (onProgress: the wait is on the run's own channels, not the inbox, which makes no read.)
    expect(redis.proxy.holdReplies(command)).toBe(1);
    const result = producer.run('rwr.none', { key: 'raced', hold: true }, { id: 'raced', onProgress: () => undefined });
    result.catch(() => undefined);
    await begun.get('raced').promise; // the enqueue ran, so the subscription (made first) is live
    // The announcement is held on its way; the run finishes and its record is deleted.
    expect(redis.proxy.holdReplies(subscriber)).toBe(1);
    gates.open('raced');
    await pollUntil(
      () => redis.raw.exists(keys.run('raced')),
      (n) => n === 0,
      'the record deleted by the finish',
    );
    // The first read now answers "no such run" before the announcement arrives.
    redis.proxy.releaseReplies(command);
    const admin = new RedisAdmin(redis.raw);
    const synced = admin.clientsWhen(
      { namePrefix: sluiceConnectionName(namespace, 'subscriber') },
      (clients) => clients.some((c) => c.cmd === 'ping'),
      'the waiter syncing with its subscriber',
    );
    await Promise.race([synced, result]);
    redis.proxy.releaseReplies();
    expect(await result).toBe('done:raced');
  });

  it("run() by name on the run's done channel whose first read is lost after the enqueue landed rejects with the run id, and the run is there", async () => {
    const { producer, worker } = await fleet({ redisTimeoutMs: 1_000 });
    expect(await producer.run('rwr.none', { key: 'warm' }, { id: 'warm' })).toBe('done:warm'); // the name confirmed
    // That run() resolved on its announcement, which can beat the reply to its own read: a call
    // sent after it on the command connection is answered after that reply, so once it is, no
    // read is on its way to be caught by the blackhole (which would take this enqueue with it).
    await producer.get('warm');
    redis.proxy.blackholeOn('_watch\r\n'); // the waiter's read, on whatever connection sends it
    const error = await rejection(() => producer.run('rwr.none', { key: 'lost', hold: true }, { onProgress: () => undefined }));
    expect(error).toBeInstanceOf(RedisConnectionError);
    expect((error as RedisConnectionError).operation).toBe('watch');
    const runId = (error as RedisConnectionError).runId;
    expect(runId).toEqual(expect.any(String));
    redis.proxy.restore({ resetTainted: true });
    // The caller can still have its result: the run was enqueued under that id, and carries on.
    const result = worker.client.wait(runId!, { timeoutMs: 10_000 });
    await begun.get('lost').promise;
    gates.open('lost');
    expect(await result).toBe('done:lost');
  });

  it('run() of a declared workflow (enqueue and subscribe together) whose subscribe is lost rejects with the run id once the enqueue landed', async () => {
    const { producer, worker } = await fleet({ redisTimeoutMs: 1_000 }, [PlainWorkflow]);
    redis.proxy.blackholeOn('subscribe'); // the subscriber's first command (no other command of this test holds the word)
    const error = await rejection(() => producer.run(PlainWorkflow, { key: 'overlapped' }, { id: 'overlapped' }));
    expect(error).toBeInstanceOf(RedisConnectionError);
    expect((error as RedisConnectionError).operation).toBe('subscribe');
    expect((error as RedisConnectionError).runId).toBe('overlapped');
    redis.proxy.restore({ resetTainted: true });
    expect(await worker.client.wait('overlapped', { timeoutMs: 10_000 })).toBe('plain:overlapped');
  });
  it('keep 0, on the inbox: the announcement carries the outcome, so the record deleted by the finish does not matter', async () => {
    const { namespace, keys, producer, producerApp } = await fleet();
    await inboxLive(producerApp, producer);
    const command = await producerConnection(namespace, 'command');
    expect(redis.proxy.holdReplies(command)).toBe(1); // the enqueue's acknowledgement comes after the end
    const result = producer.run('rwr.none', { key: 'inboxed', hold: true }, { id: 'inboxed' });
    result.catch(() => undefined);
    await begun.get('inboxed').promise;
    gates.open('inboxed');
    await pollUntil(
      () => redis.raw.exists(keys.run('inboxed')),
      (n) => n === 0,
      'the record deleted by the finish',
    );
    redis.proxy.releaseReplies();
    expect(await result).toBe('done:inboxed');
  });

  it('on the inbox, an announcement lost with its subscriber connection (reset): the wait reads its run after the reconnect and resolves', async () => {
    const { namespace, keys, producer, producerApp } = await fleet();
    await inboxLive(producerApp, producer);
    let settled = false;
    const result = producer.run('rwr.gate', { key: 'dropped' }, { id: 'dropped', timeoutMs: 20_000 }).finally(() => (settled = true));
    await begun.get('dropped').promise;
    // The subscriber goes silent: the announcement is dropped on its way, and the connection with it.
    expect(redis.proxy.blackhole(await producerConnection(namespace, 'subscriber'))).toBe(1);
    gates.open('dropped');
    await pollUntil(
      () => redis.raw.hget(keys.run('dropped'), 'state'),
      (state) => state === 'completed',
      'the run completed',
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(settled).toBe(false);
    redis.proxy.restore({ resetTainted: true }); // the dropped bytes taint it: reset, so the client reconnects
    expect(await result).toBe('gate:dropped');
  });

  it('on the inbox, an enqueue whose reply is held back: the announcement alone settles run(), and the run ran once', async () => {
    const { namespace, producer, producerApp } = await fleet();
    await inboxLive(producerApp, producer);
    expect(redis.proxy.holdReplies(await producerConnection(namespace, 'command'))).toBe(1);
    const result = producer.run('rwr.gate', { key: 'unacknowledged' }, { id: 'unacknowledged', timeoutMs: 20_000 });
    await begun.get('unacknowledged').promise;
    gates.open('unacknowledged');
    expect(await result).toBe('gate:unacknowledged');
    expect(started.get('unacknowledged')).toBe(1);
    redis.proxy.releaseReplies();
  });

  it("wait() on the inbox, its read's reply held back while the run finishes and its record goes (keep 0): the announcement settles it", async () => {
    const { namespace, keys, producer, producerApp } = await fleet();
    await inboxLive(producerApp, producer);
    const handle = await producer.enqueue('rwr.none', { key: 'watched', hold: true }, { id: 'watched' });
    await begun.get('watched').promise;
    expect(redis.proxy.holdReplies(await producerConnection(namespace, 'command'))).toBe(1);
    const result = handle.result({ timeoutMs: 20_000 });
    result.catch(() => undefined);
    const inboxId = producerApp.get(SluiceServices).waiter.inboxChannel.split(':').pop();
    await pollUntil(
      () => redis.raw.hget(keys.run('watched'), 'waited'),
      (waited) => waited === inboxId,
      'the read (its reply held) named the inbox',
    );
    gates.open('watched');
    await pollUntil(
      () => redis.raw.exists(keys.run('watched')),
      (n) => n === 0,
      'the record deleted by the finish',
    );
    expect(await result).toBe('done:watched');
    redis.proxy.releaseReplies();
  });

  it('wait() on the inbox, the announcement lost with its subscriber connection (reset): the wait reads its run after the reconnect and resolves', async () => {
    const { namespace, keys, producer, producerApp } = await fleet();
    await inboxLive(producerApp, producer);
    const handle = await producer.enqueue('rwr.gate', { key: 'unheard' }, { id: 'unheard' });
    await begun.get('unheard').promise;
    let settled = false;
    const result = handle.result({ timeoutMs: 20_000 }).finally(() => (settled = true));
    const inboxId = producerApp.get(SluiceServices).waiter.inboxChannel.split(':').pop();
    await pollUntil(
      () => redis.raw.hget(keys.run('unheard'), 'waited'),
      (waited) => waited === inboxId,
      'the inbox named',
    );
    expect(redis.proxy.blackhole(await producerConnection(namespace, 'subscriber'))).toBe(1);
    gates.open('unheard');
    await pollUntil(
      () => redis.raw.hget(keys.run('unheard'), 'state'),
      (state) => state === 'completed',
      'the run completed',
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(settled).toBe(false);
    redis.proxy.restore({ resetTainted: true }); // the dropped bytes taint it: reset, so the client reconnects
    expect(await result).toBe('gate:unheard');
  });
});
