import Redis from 'ioredis';
import { RedisConnectionError } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { appOn } from '../support/fault';
import { RedisAdmin, RedisProcess } from '../support/redis-process';
import { uniqueNamespace } from '../support/app';
import { pollUntil } from '../support/workflows';
import { commitsKey, despiteMemoKey, ThreeStepWorkflow } from './chaos.workflows';
import { ChildWorker } from './child-worker';

/**
 * Connection storms and a Redis crash under load, with two worker processes draining and a
 * producer in this process. Afterwards nothing is lost, nothing hung, each result was committed
 * once, and the namespace passes the consistency audit.
 */
jest.setTimeout(240_000);

const CHILD_ENV = { MODE: 'three-step', CONCURRENCY: '10', LOCK_MS: '3000', STALLED_INTERVAL_MS: '500' };

/** Enqueues and run()s from this process while `running()`; every call settles or the test fails. */
async function produce(client: Awaited<ReturnType<typeof appOn>>['client'], prefix: string, running: () => boolean) {
  const acknowledged: string[] = [];
  const unknown: string[] = [];
  const errors: unknown[] = [];
  let n = 0;
  const one = async () => {
    const id = `${prefix}-${n++}`;
    try {
      // Half plain enqueues, half run(): both paths must settle through the faults.
      if (n % 2) await client.enqueue(ThreeStepWorkflow, { i: n }, { id });
      else await client.run(ThreeStepWorkflow, { i: n }, { id, timeoutMs: 60_000 });
      acknowledged.push(id);
    } catch (error) {
      if (!(error instanceof RedisConnectionError) && !/shutting down/.test(String(error))) errors.push(error);
      unknown.push(id); // may or may not exist: a typed "outcome unknown" or a failed wait
      await new Promise((resolve) => setTimeout(resolve, 50)); // a producer backs off, as a real one would
    }
  };
  const lanes = Array.from({ length: 8 }, async () => {
    while (running() && n < 2_000) await one();
  });
  await Promise.all(lanes);
  return { acknowledged, unknown, errors };
}

describe('faults under load', () => {
  let server: RedisProcess;
  let admin: RedisAdmin;
  let raw: Redis;
  const children: ChildWorker[] = [];
  const producers: Array<Awaited<ReturnType<typeof appOn>>> = [];

  afterEach(async () => {
    await Promise.all(producers.splice(0).map((producer) => producer.close()));
    await Promise.all(children.splice(0).map((child) => child.kill()));
    await admin?.close();
    raw?.disconnect();
    await server?.stop();
  });

  async function setUp(args: string[] = []) {
    server = await RedisProcess.start({ args });
    admin = new RedisAdmin(new Redis(server.url));
    raw = new Redis(server.url);
    const ns = uniqueNamespace('storm');
    for (let i = 0; i < 2; i++) children.push(new ChildWorker({ REDIS_URL: server.url, NS: ns, ...CHILD_ENV }));
    await Promise.all(children.map((child) => child.waitFor((m) => m.ready === true, 'ready', 120_000)));
    const producer = await appOn(server.url, [], { namespace: ns, worker: { enabled: false }, redisTimeoutMs: 2_000 });
    producers.push(producer);
    return { ns, producer };
  }

  /**
   * Every acknowledged run (and every run whose enqueue had an unknown outcome but exists)
   * completes, once: the completion tally, written by the same script as the commit, equals the
   * number of runs. The workers' own 'completed' counter (written after the commit over a side
   * connection of theirs) is exact only when Redis itself did not crash between the two, so a
   * crash test relies on the tally alone.
   */
  async function expectAllCompleted(
    ns: string,
    producer: Awaited<ReturnType<typeof appOn>>,
    acknowledged: string[],
    unknown: string[],
    redisCrashed = false,
  ) {
    const existing = [...acknowledged];
    for (const id of unknown) if (await raw.exists(`{sluice:${ns}}:run:${id}`)) existing.push(id);
    await Promise.all(existing.map((id) => producer.client.wait(id, { timeoutMs: 90_000 })));
    // A worker counts its 'completed' event after the commit, over a connection of its own: a
    // waiter can hear of the last completions a moment before those counts land.
    const settled = (counts: Record<string, string>) =>
      existing.every((id) => counts[id] !== undefined) || existing.some((id) => Number(counts[id]) > 1);
    const commits = redisCrashed
      ? await raw.hgetall(commitsKey(ns))
      : await pollUntil(() => raw.hgetall(commitsKey(ns)), settled, "the workers' completion counts", 5_000);
    if (!redisCrashed) expect(existing.filter((id) => commits[id] !== '1')).toEqual([]);
    // A step executed by the run's current attempt though its memo had landed: a failed replay.
    // (A superseded attempt's late side effect, lateEffectsKey, is at-least-once and allowed.)
    expect(await raw.hgetall(despiteMemoKey(ns))).toEqual({});
    const report = await auditNamespace(raw, { namespace: ns, acknowledged: existing });
    expectConsistent(report);
    expect(report.workflows['chaos.three-step'].stats.completed).toBe(existing.length);
  }

  it('a CLIENT KILL storm of every Sluice connection (every 200 ms for 8 s): nothing lost or hung, fresh calls work, connection counts hold', async () => {
    const { ns, producer } = await setUp();
    let storming = true;
    const produced = produce(producer.client, 'storm', () => storming);
    let kills = 0;
    const until = Date.now() + 8_000;
    while (Date.now() < until) {
      kills += (await admin.killClients({ namePrefix: `sluice:${ns}:` })).length;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    storming = false;
    const { acknowledged, unknown, errors } = await produced;
    expect(errors).toEqual([]);
    expect(kills).toBeGreaterThan(40);
    expect(acknowledged.length).toBeGreaterThan(50);

    await expectAllCompleted(ns, producer, acknowledged, unknown);
    const fresh = await Promise.all(
      Array.from({ length: 10 }, (_, i) => producer.client.run(ThreeStepWorkflow, { i }, { timeoutMs: 30_000 })),
    );
    expect(fresh).toHaveLength(10);

    // Three processes: at most one connection of each role each (the workers' subscriber listens to
    // the cancel channel; only the two workers block).
    const clients = await admin.clients({ namePrefix: `sluice:${ns}:` });
    const byRole = (role: string) => clients.filter((c) => c.name === `sluice:${ns}:${role}`).length;
    expect(byRole('command')).toBeLessThanOrEqual(3);
    expect(byRole('blocking')).toBeLessThanOrEqual(2);
    expect(byRole('subscriber')).toBeLessThanOrEqual(3);
  });

  it('Redis SIGKILLed under load (appendfsync always) and restarted: acknowledged runs complete, outage calls fail typed and in bound, workers resume', async () => {
    const { ns, producer } = await setUp(['--appendonly', 'yes', '--appendfsync', 'always']);
    let producing = true;
    const produced = produce(producer.client, 'crash', () => producing);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await server.kill('SIGKILL');

    // During the outage: enqueues reject with a typed error within redisTimeoutMs (plus slack), none hangs.
    const startedAt = Date.now();
    const outage = await producer.client.enqueue(ThreeStepWorkflow, { i: -1 }).then(
      () => 'resolved',
      (error: unknown) => error,
    );
    expect(outage).toBeInstanceOf(RedisConnectionError);
    expect(Date.now() - startedAt).toBeLessThan(2_000 + 1_000);

    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await server.restart();
    const restartedAt = Date.now();
    // Workers resume without a restart: a run enqueued now completes within 10 s.
    const probe = await producer.client.enqueue(ThreeStepWorkflow, { i: -2 }, { id: 'probe' });
    await producer.client.wait(probe.id, { timeoutMs: 10_000 });
    expect(Date.now() - restartedAt).toBeLessThan(10_000 + 2_000);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    producing = false;
    const { acknowledged, unknown, errors } = await produced;
    expect(errors).toEqual([]);
    await expectAllCompleted(ns, producer, [...acknowledged, 'probe'], unknown, true);
  });
});
