import { Test, TestingModule } from '@nestjs/testing';
import Redis from 'ioredis';
import {
  InvalidInputError,
  QueueConfigError,
  QueueModule,
  QueueModuleOptions,
  RunContext,
  SluiceError,
  WaitTimeoutError,
  Workflow,
} from '../../lib';
import { LuaScripts } from '../../lib/redis/lua.scripts';
import { RedisAdmin, sluiceConnectionName } from '../support/redis-process';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, redisUrl, TestApp, uniqueNamespace } from '../support/app';
import { connectionNamesWhen, sluiceConnectionNames } from '../support/client-list';
import { channelSubscribers } from '../support/pubsub';
import { Counter, enterMonitor, Gates, monitorCommands, namespaceKeys, pollUntil } from '../support/workflows';
import { SluiceServices } from '../../lib/sluice.services';

/**
 * Regression tests for client-side defects (one test per defect; each fails on the code before
 * its fix). The wait() outage case (a failing background re-read must not reject the wait) is
 * covered by the chaos suite: it needs a Redis outage this shared server cannot stage.
 */
const executions = new Counter();
const gates = new Gates();

@Workflow('rc.echo')
class EchoWorkflow {
  async run(input: { value: number }, ctx: RunContext): Promise<{ doubled: number }> {
    executions.inc(ctx.runId);
    return { doubled: input.value * 2 };
  }
}

/** Fails its first attempt; the second waits on the gate named by the input, then succeeds. */
@Workflow('rc.flaky', { attempts: 3, backoff: { delayMs: 0 } })
class FlakyWorkflow {
  async run(input: { key: string }, ctx: RunContext): Promise<{ attempt: number }> {
    if (ctx.attempt === 1) throw new Error(`first attempt of ${input.key} fails`);
    await gates.get(input.key).promise;
    return { attempt: ctx.attempt };
  }
}

const begun = new Gates();
const runIds = new Map<string, string>();

/** Says it began (and under which run id), then waits on the gate named by the input. */
@Workflow('rc.gated')
class GatedWorkflow {
  async run(input: { key: string }, ctx: RunContext): Promise<string> {
    runIds.set(input.key, ctx.runId);
    begun.open(input.key);
    await gates.get(input.key).promise;
    return `opened:${input.key}`;
  }
}

const WORKFLOWS = [EchoWorkflow, FlakyWorkflow, GatedWorkflow];
const unique = (label: string) => `${label}-${Math.random().toString(36).slice(2)}`;

let redis: Redis;
const apps: TestApp[] = [];
const namespaces: string[] = [];

beforeAll(() => void (redis = rawRedis()));
afterAll(async () => {
  gates.openAll();
  await Promise.all(apps.map((app) => app.close().catch(() => undefined)));
  for (const ns of namespaces) await dropNamespace(redis, ns);
  await redis.quit();
});

async function open(label: string, options: Partial<QueueModuleOptions> = {}, namespace = uniqueNamespace(label)) {
  namespaces.push(namespace);
  const app = await createApp(WORKFLOWS, { namespace, ...options });
  apps.push(app);
  return { app, namespace, keys: new RedisKeys('sluice', namespace) };
}

async function keysMatching(pattern: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    found.push(...keys);
    cursor = next;
  } while (cursor !== '0');
  return found;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`resolved instead of rejecting: ${JSON.stringify(value)}`);
    },
    (error: unknown) => error,
  );
}

describe('regressions: QueueClient and module', () => {
  it('an ioredis instance with a keyPrefix fails the bootstrap with QueueConfigError naming keyPrefix, and writes nothing', async () => {
    const namespace = uniqueNamespace('rc-prefix');
    namespaces.push(namespace);
    const prefixed = new Redis(redisUrl(), { keyPrefix: 'x:', lazyConnect: true });
    let app: TestingModule | undefined;
    try {
      const error = await (async () => {
        app = await Test.createTestingModule({
          imports: [QueueModule.forRoot({ connection: prefixed, namespace })],
          providers: WORKFLOWS, // a worker app: it would write caps at bootstrap
        }).compile();
        app.useLogger(false);
        await app.init();
      })().then(
        () => new Error('the application started'),
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(QueueConfigError);
      expect((error as Error).message).toContain('keyPrefix');
    } finally {
      await app?.close().catch(() => undefined);
      prefixed.disconnect();
    }
    // Nothing under the namespace, prefixed or not (a prefix would only move the KEYS of a call).
    expect(await keysMatching(`*${namespace}*`)).toEqual([]);
  });

  it('run() while the module is shutting down is refused before anything is written', async () => {
    const { app, namespace, keys } = await open('rc-closing', { worker: { enabled: false } });
    app.app.get(SluiceServices).waiter.beforeApplicationShutdown(); // the state app.close() enters first
    const id = unique('refused');
    const error = await rejection(app.client.run(EchoWorkflow, { value: 1 }, { id, timeoutMs: 5_000 }));
    expect(error).toBeInstanceOf(SluiceError);
    expect((error as Error).message).toMatch(/shutting down/);
    expect((error as SluiceError).runId).toBeUndefined(); // nothing was written: no run to name
    // A write the call started would go out first on the client's one command connection (the
    // rejection itself may come before its lazy connection is even up): read after it there.
    expect(await app.client.get(id)).toBeNull();
    expect(await redis.exists(keys.run(id))).toBe(0);
    expect(await namespaceKeys(redis, namespace)).toEqual([keys.schema]); // the bootstrap's layout marker only
    // The client itself still writes (the check above could see a run): enqueue is not refused.
    await app.client.enqueue(EchoWorkflow, { value: 2 }, { id: `${id}-control` });
    expect(await redis.exists(keys.run(`${id}-control`))).toBe(1);
  });

  it('run() rejecting with WaitTimeoutError names the run it enqueued (a generated id), which carries on', async () => {
    const { app } = await open('rc-timeout-id');
    const key = unique('slow');
    const error = await rejection(app.client.run(GatedWorkflow, { key }, { timeoutMs: 200 }));
    expect(error).toBeInstanceOf(WaitTimeoutError);
    const runId = (error as WaitTimeoutError).runId;
    await begun.get(key).promise;
    expect(runId).toBe(runIds.get(key));
    gates.open(key);
    expect(await app.client.wait(runId, { timeoutMs: 10_000 })).toBe(`opened:${key}`);
  });

  it("run() abandoned by the shutdown after its enqueue landed names the run in the shutdown's SluiceError", async () => {
    const { app } = await open('rc-shutdown-id');
    const key = unique('abandoned');
    const call = rejection(app.client.run(GatedWorkflow, { key }));
    await begun.get(key).promise; // enqueued and started
    app.app.get(SluiceServices).waiter.beforeApplicationShutdown(); // the state app.close() enters first
    const error = await call;
    expect(error).toBeInstanceOf(SluiceError);
    expect((error as Error).message).toMatch(/shutting down/);
    expect((error as SluiceError).runId).toBe(runIds.get(key));
    gates.open(key);
    expect(
      await pollUntil(
        () => app.client.get(runIds.get(key)!),
        (info) => info?.state === 'completed',
        'the run completing',
      ),
    ).toMatchObject({ result: `opened:${key}` });
  });

  it.each([
    ["the run's done channel (onProgress)", true],
    ["the process's inbox", false],
  ])(
    'run() of a workflow it does not declare, waiting on %s, survives a subscriber reconnect before its enqueue lands (the re-read finds no run yet)',
    async (_path, onChannel) => {
      const { namespace, keys } = await open('rc-resub');
      const producer = await createApp([], { namespace, worker: { enabled: false } });
      apps.push(producer);
      expect(await producer.client.run('rc.echo', { value: 1 })).toEqual({ doubled: 2 }); // both connections open
      const inbox = producer.app.get(SluiceServices).waiter.inboxChannel;
      await pollUntil(
        () => channelSubscribers(redis, inbox),
        (n) => n === 1,
        'the inbox subscribed',
      );
      // The enqueue is held until the subscriber has reconnected and the waiter has re-read its run.
      const enqueueGate = gates.get(unique('enqueue'));
      const enqueueSent = gates.get(unique('enqueue-sent'));
      const send = LuaScripts.prototype.run;
      const spy = jest.spyOn(LuaScripts.prototype, 'run').mockImplementation(async function (
        this: LuaScripts,
        ...args: Parameters<LuaScripts['run']>
      ) {
        if (args[0] === 'enqueue') {
          enqueueSent.resolve();
          await enqueueGate.promise;
        }
        return send.apply(this, args);
      });
      try {
        const id = unique('resub');
        let settled: unknown;
        const options = onChannel ? { id, onProgress: () => undefined } : { id };
        const result = producer.client.run('rc.echo', { value: 21 }, options).then(
          (value) => (settled = { value }),
          (error: unknown) => (settled = { error }),
        );
        // Listening (on the run's channel, or the inbox, subscribed already) before the enqueue is sent.
        const channel = onChannel ? keys.done(id) : inbox;
        await enqueueSent.promise;
        expect(await channelSubscribers(redis, channel)).toBe(1);
        // Nothing has read the run's record yet (the enqueue is held): the next read is the
        // re-read the reconnect triggers.
        const monitor = await monitorCommands(namespace);
        try {
          // Both apps' subscribers go (the worker's listens for cancels): each is replaced by a new connection.
          const subscribers = { namePrefix: sluiceConnectionName(namespace, 'subscriber') };
          const killed = await new RedisAdmin(redis).killClients(subscribers);
          expect(killed.length).toBeGreaterThan(0);
          const killedIds = new Set(killed.map((client) => client.id));
          await pollUntil(
            async () => (await new RedisAdmin(redis).clients(subscribers)).filter((client) => !killedIds.has(client.id)).length,
            (n) => n === killed.length,
            'the subscribers reconnected',
          );
          await pollUntil(
            () => channelSubscribers(redis, channel),
            (n) => n === 1,
            'subscribed again after the reconnect',
          );
          await monitor.next((args) => args[0] === 'hmget' && args[1] === keys.run(id)); // the re-read: no run yet
        } finally {
          await monitor.close();
        }
        // That re-read went over the command connection: a call sent after it answers after it.
        await producer.client.get(id);
        expect(settled).toBeUndefined(); // before the fix: RunNotFoundError
        enqueueGate.resolve();
        await result;
        expect(settled).toEqual({ value: { doubled: 42 } });
      } finally {
        spy.mockRestore();
        enqueueGate.resolve();
      }
    },
  );

  it("a run completed on a retry does not report the earlier attempt's error", async () => {
    const { app } = await open('rc-retried');
    const key = unique('flaky');
    const handle = await app.client.enqueue(FlakyWorkflow, { key });
    // While retrying, the latest error is shown (so the scenario really has one to leave behind).
    const retrying = await pollUntil(
      () => app.client.get(handle.id),
      (info) => info?.state === 'active' && info.attempts === 2,
      'the second attempt',
    );
    expect(retrying).toMatchObject({ failures: 1, error: { name: 'Error', message: `first attempt of ${key} fails` } });
    gates.open(key);
    await expect(handle.result({ timeoutMs: 10_000 })).resolves.toEqual({ attempt: 2 });
    const done = await app.client.get(handle.id);
    expect(done).toMatchObject({ state: 'completed', attempts: 2, failures: 1, result: { attempt: 2 } });
    expect(done).not.toHaveProperty('error');
  });

  it('wait() with timeoutMs 0 or 1 resolves for a finished run and times out for a waiting one', async () => {
    const worker = await open('rc-wait0');
    const id = unique('finished');
    await worker.app.client.run(EchoWorkflow, { value: 21 }, { id, timeoutMs: 10_000 });
    for (const timeoutMs of [0, 1]) {
      await expect(worker.app.client.wait(id, { timeoutMs })).resolves.toEqual({ doubled: 42 });
    }

    const producer = await open('rc-wait0-idle', { worker: { enabled: false } });
    const waiting = await producer.app.client.enqueue(EchoWorkflow, { value: 1 });
    expect((await producer.app.client.get(waiting.id))?.state).toBe('waiting');
    for (const timeoutMs of [0, 1]) {
      const error = await rejection(producer.app.client.wait(waiting.id, { timeoutMs }));
      expect(error).toBeInstanceOf(WaitTimeoutError);
      expect(error).toMatchObject({ runId: waiting.id, timeoutMs });
    }
  });

  it('enqueueMany with a null, undefined or number item rejects with InvalidInputError on items[i] and writes nothing', async () => {
    const { app, namespace, keys } = await open('rc-items', { worker: { enabled: false } });
    const bad: Array<[unknown[], number]> = [
      [[null], 0],
      [[undefined], 0],
      [[42], 0],
      [[{ input: { value: 1 }, opts: { id: unique('good') } }, null], 1],
    ];
    for (const [items, index] of bad) {
      const error = await rejection(app.client.enqueueMany(EchoWorkflow, items as never));
      expect(error).toBeInstanceOf(InvalidInputError);
      expect((error as Error).message.startsWith(`items[${index}]`)).toBe(true);
    }
    expect(await namespaceKeys(redis, namespace)).toEqual([keys.schema]); // the bootstrap's layout marker only
  });

  it("a user-supplied ioredis instance is duplicated for Sluice's connections and never carries its commands", async () => {
    const namespace = uniqueNamespace('rc-user');
    const userName = `user-${namespace}`;
    const user = new Redis(redisUrl(), { connectionName: userName });
    const monitor = await enterMonitor(redis);
    try {
      expect(await user.ping()).toBe('PONG'); // connected and named before the app exists
      const line = ((await redis.client('LIST')) as string).split('\n').find((l) => l.includes(` name=${userName} `));
      const userAddr = /(?:^| )addr=(\S+)/.exec(line ?? '')?.[1];
      expect(userAddr).toBeDefined();
      const fromUser: string[] = []; // names of the commands the user's connection sent
      const sentinel = `sentinel-${namespace}`;
      let sentinelSeen!: () => void;
      const sentinelArrived = new Promise<void>((resolve) => (sentinelSeen = resolve));
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (source === userAddr) fromUser.push(String(args[0]).toLowerCase());
        if (String(args[0]).toLowerCase() === 'echo' && args[1] === sentinel) sentinelSeen();
      });

      const { app } = await open('rc-user', { connection: user }, namespace);
      const id = unique('user');
      await expect(app.client.run(EchoWorkflow, { value: 3 }, { id, timeoutMs: 10_000 })).resolves.toEqual({ doubled: 6 });
      expect(executions.get(id)).toBe(1);
      const expected = ['blocking', 'command', 'subscriber'].map((role) => `sluice:${namespace}:${role}`);
      const names = await connectionNamesWhen(redis, namespace, (n) => expected.every((name) => n.includes(name)));
      expect(names).toEqual(expected); // each exactly once

      // Every command executed before the sentinel has reached the monitor once the sentinel has.
      await redis.echo(sentinel);
      await sentinelArrived;
      expect(fromUser).toEqual([]);

      await app.close();
      apps.splice(apps.indexOf(app), 1);
      expect(await connectionNamesWhen(redis, namespace, (n) => n.length === 0)).toEqual([]);
      expect(await user.ping()).toBe('PONG');
      // The monitor does attribute this connection's commands (the empty list above means something).
      await pollUntil(
        async () => fromUser,
        (seen) => seen.includes('ping'),
        "the user's ping in the monitor",
        5_000,
      );
      expect(await sluiceConnectionNames(redis, namespace)).toEqual([]);
    } finally {
      monitor.disconnect();
      user.disconnect();
    }
  });
});
