import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { createServer } from 'node:net';
import {
  QueueClient,
  QueueModule,
  RunContext,
  RunEvents,
  RunFailedEvent,
  Workflow,
  WorkerShutdownError,
  WorkflowFailedError,
} from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { parseReserveReply } from '../../lib/redis/commands/reserve.command';
import { HAND_BACK_DELAY_MS, handBackRun, MAX_HAND_BACK_DELAY_MS } from '../../lib/worker/hand-back';
import { newCallId } from '../../lib/redis/commands/call-id';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { enqueueArgs, enqueueKeys, redisTimeMs } from '../support/queue-state';
import { scriptsOn } from '../support/scripts';
import { Counter, deferred, Gates } from '../support/workflows';
import { SluiceServices } from '../../lib/sluice.services';

/**
 * Which errors hand a run back to the queue without counting a failure, and what the events say
 * about a hand-back: only the attempt's own commits finding Redis away (delayed, with a backoff
 * that grows), and the shutdown deadline (no failure, no `failed` event).
 */
const executions = new Counter();
const gates = new Gates();
const begun = new Gates();

/** A QueueClient whose Redis is down: what a workflow calling another Sluice namespace sees in an outage. */
const deadDependency: { client?: QueueClient } = {};
/** Why each run of AbortedWorkflow had its signal aborted. */
const abortReasons = new Map<string, unknown>();

@Workflow('hb.dead-dependency', { attempts: 3, backoff: { delayMs: 0 } })
class DeadDependencyWorkflow {
  async run(input: { id: string }, ctx: RunContext): Promise<unknown> {
    executions.inc(ctx.runId);
    return deadDependency.client!.get(input.id); // rejects with a RedisUnavailableError
  }
}

@Workflow('hb.aborted', { attempts: 3 })
class AbortedWorkflow {
  async run(input: { key: string }, ctx: RunContext): Promise<number> {
    executions.inc(ctx.runId);
    if (ctx.attempt > 1) return ctx.attempt;
    begun.open(input.key);
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
    abortReasons.set(input.key, ctx.signal.reason);
    // The test opens this once the shutdown's hand-back has landed: the code throws on its
    // aborted signal after the run is back in the queue.
    await gates.get(input.key).promise;
    throw new Error(`gave up on ${String(ctx.signal.reason)}`);
  }
}

@Workflow('hb.held')
class HeldWorkflow {
  async run(): Promise<void> {
    await gates.get('never').promise;
  }
}

/** A loopback port nothing listens on. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('hand-backs', () => {
  let redis: Redis;
  const apps: TestApp[] = [];
  const namespaces: string[] = [];

  beforeAll(() => void (redis = rawRedis()));
  afterEach(async () => {
    gates.openAll();
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });
  afterAll(async () => {
    for (const ns of namespaces) await dropNamespace(redis, ns);
    await redis.quit();
  });

  async function worker(namespace: string, worker: object = {}) {
    namespaces.push(namespace);
    const app = await createApp([DeadDependencyWorkflow, AbortedWorkflow, HeldWorkflow], {
      namespace,
      worker: { concurrency: 5, ...worker },
    });
    apps.push(app);
    return app;
  }

  function failedEvents(app: TestApp, workflow: string): RunFailedEvent[] {
    const heard: RunFailedEvent[] = [];
    app.app.get(RunEvents).on('failed', (event) => event.workflow === workflow && heard.push(event));
    return heard;
  }

  it("a RedisConnectionError thrown by the run's own code is an ordinary failure: attempts, then failed for good, with its events", async () => {
    const dependency = await Test.createTestingModule({
      imports: [
        QueueModule.forRoot({
          connection: { host: '127.0.0.1', port: await deadPort() },
          namespace: 'elsewhere',
          redisTimeoutMs: 200,
          worker: { enabled: false },
        }),
      ],
    }).compile();
    dependency.useLogger(false);
    await dependency.init();
    apps.push({ app: dependency, client: dependency.get(QueueClient), close: () => dependency.close() });
    deadDependency.client = dependency.get(QueueClient);

    const app = await worker(uniqueNamespace('hb-dep'));
    const failed = failedEvents(app, 'hb.dead-dependency');
    const lastFailure = deferred();
    app.app.get(RunEvents).on('failed', (event) => event.workflow === 'hb.dead-dependency' && !event.willRetry && lastFailure.resolve());

    const handle = await app.client.enqueue(DeadDependencyWorkflow, { id: 'x' });
    const error = await handle.result({ timeoutMs: 15_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    expect((error as WorkflowFailedError).causeName).toBe('RedisUnavailableError');
    await lastFailure.promise;
    expect(failed.map((event) => [event.attempt, event.willRetry, event.error.name])).toEqual([
      [1, true, 'RedisUnavailableError'],
      [2, true, 'RedisUnavailableError'],
      [3, false, 'RedisUnavailableError'],
    ]);
    expect(executions.get(handle.id)).toBe(3);
    expect(await app.client.get(handle.id)).toMatchObject({ state: 'failed', attempts: 3, failures: 3 });
  });

  it('a run handed back at the shutdown deadline reports no failure, whatever its code throws on the aborted signal, and runs again', async () => {
    const ns = uniqueNamespace('hb-shutdown');
    const app = await worker(ns, { shutdownTimeoutMs: 50 });
    const failed = failedEvents(app, 'hb.aborted');
    const keys = ['a', 'b', 'c'];
    const handles = await Promise.all(keys.map((key) => app.client.enqueue(AbortedWorkflow, { key }, { id: `${ns}-${key}` })));
    await Promise.all(keys.map((key) => begun.get(key).promise));

    // The shutdown, up to its hand-backs: they have landed when this returns (the app's
    // connections stay open, so what the executors do next reaches Redis).
    const orchestrator = app.app.get(SluiceServices).orchestrator;
    await orchestrator.beforeApplicationShutdown();
    for (const handle of handles) expect(await app.client.get(handle.id)).toMatchObject({ state: 'waiting', failures: 0 });
    keys.forEach((key) => gates.open(key)); // now each run's code throws
    expect(await (orchestrator as unknown as { active: { drained(ms: number): Promise<boolean> } }).active.drained(10_000)).toBe(true);

    expect(failed).toEqual([]);
    expect(keys.map((key) => abortReasons.get(key))).toEqual(keys.map(() => expect.any(WorkerShutdownError)));
    for (const handle of handles) {
      const info = await app.client.get(handle.id);
      expect(info).toMatchObject({ state: 'waiting', attempts: 1, failures: 0 });
      expect(info?.error).toBeUndefined();
    }
    const next = await worker(ns);
    expect(await Promise.all(handles.map((handle) => handle.result({ timeoutMs: 10_000 })))).toEqual([2, 2, 2]);
    expect(failedEvents(next, 'hb.aborted')).toEqual([]);
  });

  it("release with a backoff: the run is delayed, doubling per hand-back of its own up to the cap; a shutdown's is due at once", async () => {
    const ns = uniqueNamespace('hb-backoff');
    namespaces.push(ns);
    const keys = new RedisKeys('sluice', ns);
    const scripts = scriptsOn(redis);
    const id = 'run-1';
    await scripts.run('enqueue', enqueueKeys(keys, id), enqueueArgs(keys, 'hb.held', id, {}, false));
    const claim = async () => {
      const reply = await scripts.run<unknown[]>(
        'reserve',
        [keys.stallGate, keys.call(newCallId())],
        [keys.base, 1, 60_000, 0, 3, 256, 60_000, 'hand-back-test', 0, 0, 'hb.held'],
      );
      const { claims } = parseReserveReply(reply);
      expect(claims.map((c) => c.id)).toEqual([id]);
      return claims[0];
    };
    const delays: number[] = [];
    for (let handbacks = 1; handbacks <= 7; handbacks++) {
      const run = await claim();
      const before = await redisTimeMs(redis);
      expect(await handBackRun(scripts, keys, run, {}, true, () => 0.5)).toBe(true); // no jitter: the first delay is HAND_BACK_DELAY_MS
      const after = await redisTimeMs(redis);
      const [state, dueAt, count, failures] = await redis.hmget(keys.run(id), 'state', 'dueAt', 'handbacks', 'failures');
      expect([state, count, failures]).toEqual(['delayed', String(handbacks), '0']);
      expect(Number(await redis.zscore(keys.workflow('hb.held', 'delayed'), id))).toBe(Number(dueAt));
      const expected = Math.min(MAX_HAND_BACK_DELAY_MS, HAND_BACK_DELAY_MS * 2 ** (handbacks - 1));
      expect(Number(dueAt)).toBeGreaterThanOrEqual(before + expected);
      expect(Number(dueAt)).toBeLessThanOrEqual(after + expected);
      delays.push(expected);
      // A retry of the hand-back that landed is recognised and changes nothing.
      expect(await handBackRun(scripts, keys, run, {}, true, () => 0.5)).toBe(true);
      expect(await redis.hget(keys.run(id), 'handbacks')).toBe(String(handbacks));
      await redis.zadd(keys.workflow('hb.held', 'delayed'), 0, id); // due now, without waiting out the delay
    }
    expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);

    // The shutdown's hand-back: due again at once, the count untouched.
    const run = await claim();
    expect(await handBackRun(scripts, keys, run, {})).toBe(true);
    expect(await redis.hmget(keys.run(id), 'state', 'handbacks')).toEqual(['waiting', '7']);
  });
});
