import { parseCompleteReply } from '../../lib/redis/commands/complete.command';
import { parseReserveReply } from '../../lib/redis/commands/reserve.command';
import type { TestingModule } from '@nestjs/testing';
import Redis from 'ioredis';
import { NonRetryableError, OutcomeUnknownError, QueueClient, RunContext, Step, Workflow, WorkflowFailedError } from '../../lib';
import { RedisConnections } from '../../lib/redis/redis.connections';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { newCallId } from '../../lib/redis/commands/call-id';
import { uniqueNamespace } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { appOn, ConnectionFaults } from '../support/fault';
import { LocalRedis, startRedisServer } from '../support/redis-server';
import { scriptsOn } from '../support/scripts';
import { Counter, Gates, pollUntil } from '../support/workflows';
import { enqueueArgs, enqueueKeys } from '../support/queue-state';

/**
 * A connection killed while one of Sluice's scripts is in flight (held by CLIENT PAUSE WRITE, so
 * the loss is deterministic). ioredis 5 would leave such a call pending for ever; here every
 * caller settles — with a typed error, or with the call retried once the connection is back —
 * and no run is stranded. One redis-server of this file's own: a pause affects every client.
 */
jest.setTimeout(60_000);

const counts = new Counter();
const gates = new Gates();

@Workflow('drop.gated', { attempts: 2, backoff: { delayMs: 0 } })
class GatedWorkflow {
  async run(input: { key: string; fail?: boolean }, ctx: RunContext): Promise<string> {
    const first = await this.first(input.key);
    await gates.get(input.key).promise;
    if (input.fail) throw new NonRetryableError(`failing ${input.key}`);
    counts.inc(`${ctx.runId}:run-end`);
    return `${first}+done`;
  }

  @Step() async first(key: string): Promise<string> {
    counts.inc(`${key}:first`);
    await gates.get(`${key}:in-step`).promise;
    return `first:${key}`;
  }
}

describe('a connection dropped while a script is in flight', () => {
  let server: LocalRedis;
  let admin: Redis;
  let faults: ConnectionFaults;
  const apps: Array<{ app: TestingModule; close(): Promise<void> }> = [];

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
    faults = new ConnectionFaults(admin);
  });

  const namespaces: string[] = [];

  afterEach(async () => {
    await faults.unpause().catch(() => undefined);
    gates.openAll();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    // Whatever the fault did, every run is in exactly one place and every count agrees.
    for (const namespace of namespaces.splice(0)) expectConsistent(await auditNamespace(admin, { namespace }));
  });

  afterAll(async () => {
    admin?.disconnect();
    await server?.stop();
  });

  /** A worker app with long leases and scans: during a test, its only calls are the ones the test causes. */
  async function worker(ns: string, extra: object = {}) {
    namespaces.push(ns);
    const app = await appOn(server.url, [GatedWorkflow], {
      namespace: ns,
      worker: { concurrency: 1, lockMs: 60_000, stalledIntervalMs: 60_000 },
      ...extra,
    });
    apps.push(app);
    return app;
  }

  async function producer(ns: string, extra: object = {}) {
    namespaces.push(ns);
    const app = await appOn(server.url, [], { namespace: ns, worker: { enabled: false }, ...extra });
    apps.push(app);
    return app;
  }

  /** Waits until the run is active in Redis (the worker has claimed it and its first step runs). */
  const active = (client: QueueClient, id: string) =>
    pollUntil(
      () => client.get(id),
      (run) => run?.state === 'active',
      `${id} active`,
    );

  it('enqueue: the lost call is sent again once the connection is back, and answers created', async () => {
    const ns = uniqueNamespace('drop-enq');
    const { client } = await producer(ns);
    const handle = await faults.dropDuringScript(`sluice:${ns}:command`, () => client.enqueue(GatedWorkflow, { key: 'e1' }, { id: 'e1' }));
    expect(handle).toMatchObject({ id: 'e1', created: true });
    expect(await client.get('e1')).toMatchObject({ state: 'waiting', attempts: 0 });
    expect((await client.enqueue(GatedWorkflow, { key: 'e1' }, { id: 'e1' })).created).toBe(false);
  });

  it('enqueue: past redisTimeoutMs the caller gets OutcomeUnknownError naming the run id, and a retry with that id is safe', async () => {
    const ns = uniqueNamespace('drop-enq2');
    const { client } = await producer(ns, { redisTimeoutMs: 1_000 });
    await faults.pauseWrites();
    let error: unknown;
    try {
      error = await client.enqueue(GatedWorkflow, { key: 'e2' }).catch((e: unknown) => e);
    } finally {
      await faults.unpause();
    }
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    const runId = (error as OutcomeUnknownError).runId!;
    expect(runId).toEqual(expect.any(String));
    const retried = await client.enqueue(GatedWorkflow, { key: 'e2' }, { id: runId });
    expect(retried.id).toBe(runId);
    expect(await client.get(runId)).toMatchObject({ state: 'waiting' });
  });

  it('concurrent enqueues, batched into shared calls: past redisTimeoutMs each caller gets OutcomeUnknownError naming its own run id', async () => {
    const ns = uniqueNamespace('drop-enq3');
    const { client } = await producer(ns, { redisTimeoutMs: 1_000 });
    await faults.pauseWrites();
    let errors: unknown[];
    try {
      // The first goes out alone; the others, made while it is in flight, go out in one batch.
      errors = await Promise.all(
        Array.from({ length: 20 }, (_, i) => client.enqueue(GatedWorkflow, { key: `c${i}` }).catch((e: unknown) => e)),
      );
    } finally {
      await faults.unpause();
    }
    expect(errors.every((error) => error instanceof OutcomeUnknownError)).toBe(true);
    const runIds = errors.map((error) => (error as OutcomeUnknownError).runId!);
    expect(new Set(runIds).size).toBe(20);
    await Promise.all(runIds.map((runId, i) => client.enqueue(GatedWorkflow, { key: `c${i}` }, { id: runId })));
    const stored = await Promise.all(runIds.map((runId) => client.get(runId)));
    expect(stored.map((run) => run?.input)).toEqual(runIds.map((_, i) => ({ key: `c${i}` })));
  });

  it('calls made the moment the socket dies (ioredis still says ready, refuses to send) go out after the reconnect', async () => {
    const ns = uniqueNamespace('drop-unsent');
    const { app, client } = await producer(ns);
    await client.enqueue(GatedWorkflow, { key: 'u0' }, { id: 'u0' });
    const redis = app.get(RedisConnections).command.client;
    // A reset: the socket is destroyed at once, and ioredis handles its 'close' a tick later.
    (redis as unknown as { stream: { destroy(): void } }).stream.destroy();
    expect(redis.status).toBe('ready');
    // Sent in that window ioredis refuses them unsent: they used to fail at once with
    // RedisUnavailableError, though the connection was back within milliseconds. A repeatable
    // call (enqueue, get) and one that is not (setLimits: its first send is still to come).
    const [handle, run, limit] = await Promise.all([
      client.enqueue(GatedWorkflow, { key: 'u1' }, { id: 'u1' }),
      client.get('u0'),
      client.setLimits({ workflow: 'drop.gated', limit: 3 }),
    ]);
    expect(handle).toMatchObject({ id: 'u1', created: true });
    expect(run).toMatchObject({ id: 'u0', state: 'waiting' });
    expect(limit).toBeNull(); // the previous cap: none
    expect(await client.getLimits({ workflow: 'drop.gated' })).toMatchObject({ workflow: 3 });
  });

  it('stats and wait (the watch script): settle after the reconnect', async () => {
    const ns = uniqueNamespace('drop-read');
    const { client } = await producer(ns);
    await client.enqueue(GatedWorkflow, { key: 'r1' }, { id: 'r1' });
    const stats = await faults.dropDuringScript(`sluice:${ns}:command`, () => client.stats({ workflow: GatedWorkflow }));
    expect(stats.workflows['drop.gated']).toMatchObject({ waiting: 1 });
    const wait = faults.dropDuringScript(`sluice:${ns}:command`, () => client.wait('r1', { timeoutMs: 20_000 }));
    const { client: workerClient } = await worker(ns);
    await active(workerClient, 'r1');
    gates.open('r1:in-step');
    gates.open('r1');
    await expect(wait).resolves.toBe('first:r1+done');
  });

  it('setLimits: not repeatable, so it rejects with OutcomeUnknownError; nothing was written', async () => {
    const ns = uniqueNamespace('drop-lim');
    const { client } = await producer(ns);
    await expect(
      faults.dropDuringScript(`sluice:${ns}:command`, () => client.setLimits({ workflow: 'drop.gated', limit: 4 })),
    ).rejects.toBeInstanceOf(OutcomeUnknownError);
    expect(await client.getLimits({ workflow: 'drop.gated' })).toMatchObject({ workflow: null });
  });

  it('run control: cancel, pause and listRuns are sent again after a lost reply and settle right; retry is not repeatable', async () => {
    const ns = uniqueNamespace('drop-ctl');
    const { client } = await producer(ns);
    await worker(ns); // registers the workflow with the fleet; its one slot stays free (nothing is due)
    const waiting = await client.enqueue(GatedWorkflow, { key: 'c1' }, { id: 'c1', delayMs: '1h' });
    // Resent after the lost reply: whether the first try landed (the resend finds the run
    // cancelled) or not (the resend cancels it), the call says it cancelled the run.
    const cancelled = await faults.dropDuringScript(`sluice:${ns}:command`, () => client.cancel(waiting.id));
    expect(cancelled.cancelled).toBe(true);
    expect(['delayed', 'cancelled']).toContain(cancelled.state);
    expect((await client.get(waiting.id))?.state).toBe('cancelled');
    await faults.dropDuringScript(`sluice:${ns}:command`, () => client.pause({ workflow: GatedWorkflow }));
    expect((await client.stats({ workflow: GatedWorkflow })).workflows['drop.gated'].paused).toBe(true);
    const page = await faults.dropDuringScript(`sluice:${ns}:command`, () =>
      client.listRuns({ workflow: GatedWorkflow, state: 'cancelled' }),
    );
    expect(page.runs.map((run) => run.id)).toEqual(['c1']);
    // retry: not resent, so the caller learns the outcome is unknown; the run is in one place either way.
    await expect(faults.dropDuringScript(`sluice:${ns}:command`, () => client.retry('c1'))).rejects.toBeInstanceOf(OutcomeUnknownError);
    expect(['waiting', 'cancelled']).toContain((await client.get('c1'))?.state);
    await client.cancel('c1'); // nothing runnable left behind (a no-op if retry did not land)
    expect(await client.resume({ workflow: GatedWorkflow })).toBe(true);
  });

  it('save-steps: the step result is persisted by the retry, the step ran once, the run completes', async () => {
    const ns = uniqueNamespace('drop-step');
    const { client } = await worker(ns);
    const handle = await client.enqueue(GatedWorkflow, { key: 's1' }, { id: 's1' });
    await active(client, 's1');
    await faults.dropDuringScript(`sluice:${ns}:command`, async () => gates.open('s1:in-step'));
    gates.open('s1');
    expect(await handle.result({ timeoutMs: 20_000 })).toBe('first:s1+done');
    expect(counts.get('s1:first')).toBe(1);
    expect(await client.get('s1')).toMatchObject({ state: 'completed', attempts: 1, failures: 0 });
  });

  it('complete: the commit is recovered, the run completes once and frees its slot', async () => {
    const ns = uniqueNamespace('drop-done');
    const { client } = await worker(ns);
    const handle = await client.enqueue(GatedWorkflow, { key: 'c1' }, { id: 'c1' });
    gates.open('c1:in-step');
    await active(client, 'c1');
    const result = handle.result({ timeoutMs: 20_000 });
    await faults.dropDuringScript(`sluice:${ns}:command`, async () => gates.open('c1'));
    expect(await result).toBe('first:c1+done');
    expect(counts.get('c1:run-end')).toBe(1);
    expect(await client.get('c1')).toMatchObject({ state: 'completed', attempts: 1 });
    const stats = await client.stats();
    expect(stats.namespace.active).toBe(0);
    expect(stats.workflows['drop.gated']).toMatchObject({ active: 0, completed: 1 });
    // The worker was not wedged: a second run goes through.
    gates.open('c2:in-step');
    gates.open('c2');
    expect(await client.run(GatedWorkflow, { key: 'c2' }, { timeoutMs: 20_000 })).toBe('first:c2+done');
  });

  it('fail: the failure is recorded once and the waiter gets WorkflowFailedError', async () => {
    const ns = uniqueNamespace('drop-fail');
    const { client } = await worker(ns);
    const handle = await client.enqueue(GatedWorkflow, { key: 'f1', fail: true }, { id: 'f1' });
    gates.open('f1:in-step');
    await active(client, 'f1');
    const result = handle.result({ timeoutMs: 20_000 }).catch((e: unknown) => e);
    await faults.dropDuringScript(`sluice:${ns}:command`, async () => gates.open('f1'));
    expect(await result).toBeInstanceOf(WorkflowFailedError);
    expect(await client.get('f1')).toMatchObject({ state: 'failed', failures: 1 });
    expect((await client.stats()).workflows['drop.gated']).toMatchObject({ failed: 1, active: 0 });
  });

  it('reserve (and the park that follows it): the worker keeps claiming after the drop', async () => {
    const ns = uniqueNamespace('drop-res');
    const { client } = await worker(ns, { fastPath: false });
    gates.open('d1:in-step');
    gates.open('d1');
    // Due in a moment: the idle worker wakes for it and reserves while the pause holds the script.
    const handle = await client.enqueue(GatedWorkflow, { key: 'd1' }, { id: 'd1', delayMs: 1_500 });
    await faults.dropDuringScript(`sluice:${ns}:command`, () => handle.result({ timeoutMs: 20_000 }));
    expect(await client.get('d1')).toMatchObject({ state: 'completed', attempts: 1 });
  });

  it('extend-leases: the heartbeat carries on after the drop; the run is neither stalled nor aborted', async () => {
    const ns = uniqueNamespace('drop-hb');
    namespaces.push(ns);
    const app = await appOn(server.url, [GatedWorkflow], {
      namespace: ns,
      worker: { concurrency: 1, lockMs: 3_000, stalledIntervalMs: 60_000 },
    });
    apps.push(app);
    const handle = await app.client.enqueue(GatedWorkflow, { key: 'h1' }, { id: 'h1' });
    gates.open('h1:in-step');
    await active(app.client, 'h1');
    // Saturated and idle: its next script is the heartbeat (every second).
    await faults.dropDuringScript(`sluice:${ns}:command`, async () => undefined);
    const keys = new RedisKeys('sluice', ns);
    const before = Number(await admin.zscore(keys.leases, 'h1'));
    await pollUntil(
      () => admin.zscore(keys.leases, 'h1').then(Number),
      (score) => score > before,
      'a renewed lease',
      10_000,
    );
    gates.open('h1');
    expect(await handle.result({ timeoutMs: 20_000 })).toBe('first:h1+done');
    expect((await admin.hget(keys.run('h1'), 'stalls')) ?? '0').toBe('0'); // a lean record has none while 0
  });

  it('release (hand-back at the shutdown deadline): app.close() returns within its bound', async () => {
    const ns = uniqueNamespace('drop-rel');
    namespaces.push(ns);
    const app = await appOn(server.url, [GatedWorkflow], {
      namespace: ns,
      worker: { concurrency: 1, lockMs: 60_000, stalledIntervalMs: 60_000, shutdownTimeoutMs: 100 },
    });
    await app.client.enqueue(GatedWorkflow, { key: 'x1' }, { id: 'x1' });
    await active(app.client, 'x1');
    await faults.pauseWrites();
    const startedAt = Date.now();
    try {
      await app.close(); // the hand-back's release is held by the pause: bounded, not hung
    } finally {
      await faults.unpause();
    }
    // shutdownTimeoutMs + the documented bound (a few seconds), not the 10 s call bound or for ever.
    expect(Date.now() - startedAt).toBeLessThan(100 + 6_000);
    gates.open('x1:in-step');
  });
});

describe('retries of commits that did land are recognised (script level)', () => {
  let server: LocalRedis;
  let redis: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    redis = new Redis(server.url);
  });

  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  const ns = uniqueNamespace('replay');
  const keys = new RedisKeys('sluice', ns);
  const enqueue = (scripts: ReturnType<typeof scriptsOn>, id: string) =>
    scripts.run('enqueue', enqueueKeys(keys, id), enqueueArgs(keys, 'wf', id, {}, false, 30_000, false, { nonce: 'n-' + id }));
  const reserve = (scripts: ReturnType<typeof scriptsOn>, callId: string, n: number, repeat = false) =>
    scripts.run<unknown[]>(
      'reserve',
      [keys.stallGate, keys.call(callId)],
      [keys.base, n, 30_000, 0, 3, 256, 60_000, 'w', repeat ? 1 : 0, 0, 'wf'],
    );

  it('reserve sent twice with one call id claims once and answers the same claims', async () => {
    const scripts = scriptsOn(redis);
    await enqueue(scripts, 'a');
    await enqueue(scripts, 'b');
    const callId = newCallId();
    const [, ...first] = await reserve(scripts, callId, 1);
    const [head, ...again] = await reserve(scripts, callId, 1, true);
    expect((head as number[])[0]).toBe(0); // the head: ms until the next due work (0: reserve again at once), Redis time
    expect(head).toHaveLength(2);
    expect(again).toEqual(first);
    expect(await redis.zcard(keys.leases)).toBe(1);
    expect(await redis.llen(keys.lane('wf', undefined, 'queue'))).toBe(1);
  });

  it('complete sent twice answers completed both times, counts once, and hands back the same refill', async () => {
    const scripts = scriptsOn(redis);
    const [{ id, token }] = parseReserveReply(await reserve(scripts, newCallId(), 1)).claims;
    await enqueue(scripts, 'refill'); // what the complete claims into the slot it frees
    const callId = newCallId();
    const complete = (repeat: number) =>
      scripts.run<unknown[]>(
        'complete',
        [keys.call(callId)],
        [keys.base, 60_000, 1, 30_000, repeat, '', 0, '', 1, 'wf', 0, id, token, '"ok"', ''],
      );
    const first = parseCompleteReply(await complete(0));
    const again = parseCompleteReply(await complete(1));
    expect(first.completed).toEqual([true]);
    expect(again.completed).toEqual([true]);
    expect(first.claims.map((claim) => claim.id)).toEqual(['refill']);
    expect(again.claims).toEqual(first.claims);
    expect(await redis.hget(keys.workflow('wf', 'stats'), 'completed')).toBe('1');
  });

  it('fail sent twice answers the recorded outcome; a stale token still answers lost', async () => {
    const scripts = scriptsOn(redis);
    await enqueue(scripts, 'c');
    const { claims } = parseReserveReply(await reserve(scripts, newCallId(), 5));
    const { id, token } = claims.find((c) => c.id === 'c')!;
    const fail = (t: string) =>
      scripts.run(
        'fail',
        [keys.run(id), keys.leases, keys.limits, keys.seq],
        [keys.base, id, t, '{"name":"E","message":"m"}', 0, 0, 60_000],
      );
    expect(await fail(token)).toBe('failed');
    expect(await fail(token)).toBe('failed');
    expect(await fail('1')).toBe('lost');
    expect(await redis.hget(keys.workflow('wf', 'stats'), 'failed')).toBe('1');
    expect(await redis.hget(keys.run(id), 'failures')).toBe('1');
  });
});
