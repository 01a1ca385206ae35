import type Redis from 'ioredis';
import { InvalidNameError, InvalidOptionError, RunCancelledError, RunContext, RunNotFoundError, Workflow } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { deferred, Deferred, Gates, pollUntil } from '../support/workflows';

/**
 * Cancel in every state a run can be in, in one process (the cross-process case is in
 * test/chaos/run-control.spec.ts): a queued run leaves its lane at once, an active one frees its
 * slot in the same call and has its signal aborted, its waiters reject with RunCancelledError, and
 * its later writes are refused.
 */
const gates = new Gates();
const aborted = new Map<string, Deferred<unknown>>();
const abortedOf = (id: string) => aborted.get(id) ?? (aborted.set(id, deferred()), aborted.get(id)!);
const started = new Gates();
const ended = new Gates();
const startedIds = new Set<string>();
const stepRuns: string[] = [];

@Workflow('cx.hold', { concurrency: 1, attempts: 1 })
class Hold {
  async run(input: { key: string; ignore?: boolean }, ctx: RunContext) {
    startedIds.add(ctx.runId);
    started.open(ctx.runId);
    ctx.signal.addEventListener('abort', () => abortedOf(ctx.runId).resolve(ctx.signal.reason));
    try {
      // An ill-behaved run ignores its signal and carries on until the test lets it.
      await gates.get(input.key).promise;
      await ctx.step('after', () => stepRuns.push(ctx.runId));
      return 'finished anyway';
    } finally {
      ended.open(ctx.runId);
    }
  }
}

describe('cancel', () => {
  const ns = uniqueNamespace('cx');
  const base = `{sluice:${ns}}:`;
  let redis: Redis;
  let worker: TestApp;
  let producer: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Hold], { namespace: ns, worker: { concurrency: 4 } });
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
  });
  afterAll(async () => {
    gates.openAll();
    await worker.close();
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('an active run: slot freed in the same call, signal aborted with the reason, later writes refused, waiter rejects', async () => {
    const first = await producer.client.enqueue('cx.hold', { key: 'a1' });
    const waited = producer.client.wait(first.id);
    // Its rejection may come before cancel() resolves (the done message and the reply travel on two connections).
    waited.catch(() => undefined);
    await started.get(first.id).promise;
    expect(await redis.scard(`${base}wf:cx.hold:active`)).toBe(1);

    const second = await producer.client.enqueue('cx.hold', { key: 'a2' });
    const result = await producer.client.cancel(first.id, { reason: 'operator asked' });
    expect(result).toEqual({ cancelled: true, state: 'active', children: 0 });
    await expect(waited).rejects.toEqual(expect.objectContaining({ name: 'RunCancelledError', runId: first.id, reason: 'operator asked' }));
    await expect(producer.client.wait(first.id)).rejects.toBeInstanceOf(RunCancelledError);

    // The worker's signal aborts (the cancel message), with the error and its reason.
    const reason = await abortedOf(first.id).promise;
    expect(reason).toBeInstanceOf(RunCancelledError);
    expect((reason as RunCancelledError).reason).toBe('operator asked');

    // The cap of 1 is free although the first run's code still runs: the second starts.
    await started.get(second.id).promise;
    // The first run ignores its signal and tries to write a step and its result: both refused.
    gates.open('a1');
    await ended.get(first.id).promise;
    // Its attempt is over: the step it calls next does not even start (no new side effect).
    expect(stepRuns).not.toContain(first.id);
    const info = await producer.client.get(first.id);
    expect(info?.state).toBe('cancelled');
    expect(info?.error).toEqual({ name: 'RunCancelledError', message: 'cancelled: operator asked', reason: 'operator asked' });
    gates.open('a2');
    await expect(second.result({ timeoutMs: 10_000 })).resolves.toBe('finished anyway');
    await pollUntil(
      () => redis.zcard(`${base}leases`),
      (n) => n === 0,
      'leases released',
    );
    const after = await producer.client.get(first.id);
    expect(after?.state).toBe('cancelled');
    expect(after?.result).toBeUndefined();
    expect(await redis.hget(`${base}run:${first.id}`, 'step:after#1')).toBeNull();
    expect((await producer.client.stats({ workflow: 'cx.hold' })).workflows['cx.hold']).toEqual(
      expect.objectContaining({ cancelled: 1, completed: 1, active: 0 }),
    );
  });

  it('waiting (FIFO, priority, grouped) and delayed runs leave their lane at once; the audit stays clean', async () => {
    const holder = await producer.client.enqueue('cx.hold', { key: 'w0' });
    await started.get(holder.id).promise;
    const plain = await producer.client.enqueue('cx.hold', { key: 'w1' });
    const urgent = await producer.client.enqueue('cx.hold', { key: 'w2' }, { priority: 5 });
    const grouped = await producer.client.enqueue('cx.hold', { key: 'w3' }, { group: 'tenant-a' });
    const later = await producer.client.enqueue('cx.hold', { key: 'w4' }, { delayMs: '1h' });
    const kept = await producer.client.enqueue('cx.hold', { key: 'w5' });
    for (const handle of [plain, urgent, grouped, later]) {
      const before = (await producer.client.get(handle.id))!.state;
      expect(await producer.client.cancel(handle.id)).toEqual({ cancelled: true, state: before, children: 0 });
      await expect(handle.result()).rejects.toBeInstanceOf(RunCancelledError);
    }
    expect(await redis.lrange(`${base}wf:cx.hold:queue`, 0, -1)).toEqual([kept.id]);
    expect(await redis.zcard(`${base}wf:cx.hold:waiting`)).toBe(0);
    expect(await redis.zcard(`${base}wf:cx.hold:delayed`)).toBe(0);
    expect(await redis.llen(`${base}wf:cx.hold:g:tenant-a:queue`)).toBe(0);
    expect(await redis.sismember(`${base}wf:cx.hold:groups`, 'tenant-a')).toBe(0);
    const stats = (await producer.client.stats({ workflow: 'cx.hold' })).workflows['cx.hold'];
    expect({ waiting: stats.waiting, delayed: stats.delayed }).toEqual({ waiting: 1, delayed: 0 });
    expectConsistent(await auditNamespace(redis, { namespace: ns }));

    gates.open('w0');
    gates.open('w5');
    await expect(kept.result({ timeoutMs: 10_000 })).resolves.toBe('finished anyway');
    // Only the run not cancelled ever started.
    for (const handle of [plain, urgent, grouped, later]) expect(startedIds.has(handle.id)).toBe(false);
  });

  it('a finished run is left alone and says so; an unknown run is RunNotFoundError', async () => {
    const done = await producer.client.enqueue('cx.hold', { key: 'f1' });
    gates.open('f1');
    await done.result({ timeoutMs: 10_000 });
    expect(await producer.client.cancel(done.id)).toEqual({ cancelled: false, state: 'completed', children: 0 });
    expect((await producer.client.get(done.id))?.state).toBe('completed');
    await expect(producer.client.cancel('no-such-run')).rejects.toBeInstanceOf(RunNotFoundError);
    // cx.hold does not index its completed runs (no indexCompleted): no index is written, and
    // listing them says so; its cancelled runs are always indexed.
    expect(await redis.exists(`${base}wf:cx.hold:completed`)).toBe(0);
    await expect(producer.client.listRuns({ workflow: 'cx.hold', state: 'completed' })).rejects.toThrow(/not indexed.*indexCompleted/);
    const cancelled = await producer.client.listRuns({ workflow: 'cx.hold', state: 'cancelled' });
    expect(cancelled.runs.length).toBeGreaterThanOrEqual(5);
    expect(cancelled.runs.every((run) => run.state === 'cancelled')).toBe(true);
    // Cancelling twice: the second call finds it cancelled.
    const twice = await producer.client.enqueue('cx.hold', { key: 'f2' }, { delayMs: '1h' });
    await producer.client.cancel(twice.id);
    expect(await producer.client.cancel(twice.id)).toEqual({ cancelled: false, state: 'cancelled', children: 0 });
  });

  it('bad input: typed errors before any Redis call', async () => {
    const client = producer.client;
    await expect(client.cancel('')).rejects.toBeInstanceOf(InvalidNameError);
    await expect(client.cancel('a b')).rejects.toBeInstanceOf(InvalidNameError);
    await expect(client.cancel(42 as unknown as string)).rejects.toBeInstanceOf(InvalidNameError);
    await expect(client.cancel('x', { reason: 7 as unknown as string })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(client.cancel('x', { reason: 'r'.repeat(1001) })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(client.cancel('x', null as unknown as object)).rejects.toBeInstanceOf(InvalidOptionError);
  });
});

describe('cancel: the heartbeat backstop', () => {
  const ns = uniqueNamespace('cxb');
  let redis: Redis;
  let app: TestApp;
  beforeAll(async () => {
    redis = rawRedis();
    app = await createApp([Hold], { namespace: ns, worker: { concurrency: 2, lockMs: 900 } });
  });
  afterAll(async () => {
    gates.openAll();
    await app.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('a cancel whose message never reached the worker still aborts the run, at its next lease beat, with its reason', async () => {
    const run = await app.client.enqueue('cx.hold', { key: 'b1' });
    await started.get(run.id).promise;
    // What cancel.lua leaves behind, without its publish: as if the worker's subscriber was
    // reconnecting, or the beat came first (the message travels on another connection).
    const base = `{sluice:${ns}}:`;
    const error = { name: 'RunCancelledError', message: 'cancelled: via the beat', reason: 'via the beat' };
    await redis.hset(`${base}run:${run.id}`, 'state', 'cancelled', 'error', JSON.stringify(error));
    const reason = await abortedOf(run.id).promise;
    expect(reason).toBeInstanceOf(RunCancelledError);
    expect((reason as RunCancelledError).reason).toBe('via the beat');
  });
});

describe('cancel: the local slot', () => {
  const ns = uniqueNamespace('cxl');
  let redis: Redis;
  let app: TestApp;
  beforeAll(async () => {
    redis = rawRedis();
    app = await createApp([Hold], { namespace: ns, worker: { concurrency: 1 } });
  });
  afterAll(async () => {
    gates.openAll();
    await app.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('a cancelled attempt ends at once in its worker, which takes other work although the code ignores its signal', async () => {
    const stuck = await app.client.enqueue('cx.hold', { key: 'l1' });
    await started.get(stuck.id).promise;
    await app.client.cancel(stuck.id);
    // The worker's only slot: free although run l1's code is still blocked on its gate.
    const next = await app.client.enqueue('cx.hold', { key: 'l2' });
    await started.get(next.id).promise;
    expect(startedIds.has(next.id)).toBe(true);
    gates.open('l2');
    await expect(next.result({ timeoutMs: 10_000 })).resolves.toBe('finished anyway');
    gates.open('l1');
    await ended.get(stuck.id).promise;
    expect((await app.client.get(stuck.id))?.state).toBe('cancelled');
  });
});
