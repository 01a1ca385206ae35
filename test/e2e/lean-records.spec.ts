import type Redis from 'ioredis';
import { CURRENT_LAYOUT, RunCancelledError, RunContext, WorkflowFailedError, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { runIdTime } from '../../lib/workflow/run-id';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Layout3Process } from '../support/layout-3';
import { Counter } from '../support/workflows';

/**
 * Lean run records (layout 4, lua/includes/records.lua): a new namespace starts at layout 4 and
 * stores runs without the fields a reader derives (attempts, failures, stalls, priority 0;
 * maxAttempts 3; the token base; dueAt when due at once; createdAt of a generated id, which
 * carries it). Every script and reader treats a missing field as what it derives. A namespace at
 * layout 3 stores full records unless `compactRunRecords` asks for lean ones. The flow model
 * (test/e2e/invariants.spec.ts) and every other e2e spec run on lean records too (their
 * namespaces are new).
 */
const attempts = new Counter();

@Workflow('lean.flaky', { attempts: 3, backoff: { delayMs: 1 } })
class FlakyWorkflow {
  run(input: { fail: 'first' | 'always' | 'never' }, ctx: RunContext): { attempt: number } {
    attempts.inc(ctx.runId);
    if (input.fail === 'always' || (input.fail === 'first' && ctx.attempt === 1)) throw new Error(`attempt ${ctx.attempt} fails`);
    return { attempt: ctx.attempt };
  }
}

const DERIVED = ['attempts', 'failures', 'stalls', 'priority', 'maxAttempts', 'token', 'dueAt'];

describe('lean run records', () => {
  let producer: TestApp;
  let worker: TestApp | undefined;
  let namespace: string;
  let redis: Redis;
  let keys: RedisKeys;
  const fieldsOf = async (id: string) => Object.keys(await redis.hgetall(keys.run(id))).sort();

  beforeAll(async () => {
    namespace = uniqueNamespace('lean');
    keys = new RedisKeys('sluice', namespace);
    redis = rawRedis();
    producer = await createApp([FlakyWorkflow], { namespace, worker: { enabled: false } });
  });
  afterAll(async () => {
    await worker?.close();
    await producer.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('a new namespace is at layout 4 and stores lean records from enqueue and enqueueMany; get() shows what they leave out', async () => {
    expect(await redis.get(keys.schema)).toBe(String(CURRENT_LAYOUT));
    const before = Date.now();
    const one = await producer.client.enqueue(FlakyWorkflow, { fail: 'never' });
    const [many, prioritised] = await producer.client.enqueueMany(FlakyWorkflow, [
      { input: { fail: 'never' } },
      { input: { fail: 'never' }, opts: { priority: 4, attempts: 5 } },
    ]);
    const given = await producer.client.enqueue(FlakyWorkflow, { fail: 'never' }, { id: `given-${namespace}` });
    const delayed = await producer.client.enqueue(FlakyWorkflow, { fail: 'never' }, { delayMs: 60_000 });
    const after = Date.now();

    for (const id of [one.id, many.id]) expect(await fieldsOf(id)).toEqual(['input', 'state', 'workflow']);
    expect(await fieldsOf(prioritised.id)).toEqual(['input', 'maxAttempts', 'priority', 'state', 'workflow']);
    // A caller-given id carries no time, and needs the enqueue's nonce.
    expect(await fieldsOf(given.id)).toEqual(['createdAt', 'input', 'nonce', 'state', 'workflow']);
    expect(await fieldsOf(delayed.id)).toEqual(['dueAt', 'input', 'state', 'workflow']);

    const info = await producer.client.get(one.id);
    expect(info).toMatchObject({ state: 'waiting', priority: 0, attempts: 0, failures: 0, maxAttempts: 3 });
    expect(info!.createdAt.getTime()).toBe(runIdTime(one.id));
    expect(info!.createdAt.getTime()).toBeGreaterThanOrEqual(before);
    expect(info!.createdAt.getTime()).toBeLessThanOrEqual(after);
    expect(info!.dueAt).toEqual(info!.createdAt);
    expect(await producer.client.get(prioritised.id)).toMatchObject({ priority: 4, maxAttempts: 5, attempts: 0 });
    const late = await producer.client.get(delayed.id);
    expect(late!.dueAt.getTime() - late!.createdAt.getTime()).toBeGreaterThanOrEqual(59_000);
    await producer.client.cancel(delayed.id);
  });

  it('a worker runs them: retries up to the derived 3 attempts, leases from the derived token, a cancel finds the queued run', async () => {
    const waiting = await producer.client.enqueue(FlakyWorkflow, { fail: 'never' });
    await producer.client.cancel(waiting.id);
    await expect(waiting.result({ timeoutMs: 5_000 })).rejects.toBeInstanceOf(RunCancelledError);

    const flaky = await producer.client.enqueue(FlakyWorkflow, { fail: 'first' }, { priority: 2 });
    const doomed = await producer.client.enqueue(FlakyWorkflow, { fail: 'always' });
    worker = await createApp([FlakyWorkflow], { namespace });
    expect(await flaky.result({ timeoutMs: 10_000 })).toEqual({ attempt: 2 });
    expect(await producer.client.get(flaky.id)).toMatchObject({ state: 'completed', attempts: 2, failures: 1, priority: 2 });
    await expect(doomed.result({ timeoutMs: 10_000 })).rejects.toBeInstanceOf(WorkflowFailedError);
    expect(await producer.client.get(doomed.id)).toMatchObject({ state: 'failed', attempts: 3, failures: 3, maxAttempts: 3 });
    expect(attempts.get(doomed.id)).toBe(3);
    expect(attempts.get(waiting.id)).toBe(0);
    // The first claim's token counts up from the base the id's time gives (creation ms × 1000).
    const token = BigInt((await redis.hget(keys.run(flaky.id), 'token'))!);
    expect(token).toBe(BigInt(runIdTime(flaky.id)!) * 1000n + 2n);
  });

  it('a namespace at layout 3 (shared with older releases) stores full records, unless compactRunRecords', async () => {
    const ns = uniqueNamespace('lean-l3');
    const l3 = new RedisKeys('sluice', ns);
    await redis.set(l3.schema, '3');
    const full = await createApp([FlakyWorkflow], { namespace: ns, worker: { enabled: false } });
    const compact = await createApp([FlakyWorkflow], { namespace: ns, worker: { enabled: false }, compactRunRecords: true });
    try {
      const a = await full.client.enqueue(FlakyWorkflow, { fail: 'never' });
      const b = await compact.client.enqueue(FlakyWorkflow, { fail: 'never' });
      expect(Object.keys(await redis.hgetall(l3.run(a.id)))).toEqual(expect.arrayContaining([...DERIVED, 'createdAt']));
      expect(Object.keys(await redis.hgetall(l3.run(b.id))).sort()).toEqual(['input', 'state', 'workflow']);
      expect(await redis.get(l3.schema)).toBe('3');
    } finally {
      await full.close();
      await compact.close();
      await dropNamespace(redis, ns);
    }
  });

  it('a rolling deploy stays at layout 3: the previous release runs what this one enqueues and the other way round; layout 4 only when asked', async () => {
    const ns = uniqueNamespace('lean-fleet');
    const l3 = new RedisKeys('sluice', ns);
    await redis.set(l3.schema, '3');
    const previous = new Layout3Process(redis, l3);
    const app = await createApp([FlakyWorkflow], { namespace: ns, worker: { enabled: false } });
    let current: TestApp | undefined;
    try {
      // This release's bootstrap left the layout where older processes can follow.
      expect(await redis.get(l3.schema)).toBe('3');
      const handles = await app.client.enqueueMany(
        FlakyWorkflow,
        Array.from({ length: 10 }, () => ({ input: { fail: 'never' as const } })),
      );
      handles.push(await app.client.enqueue(FlakyWorkflow, { fail: 'never' }, { id: `given-${ns}` }));
      const claims = await previous.reserve(['lean.flaky'], 50);
      expect(claims.map((c) => c.id).sort()).toEqual(handles.map((h) => h.id).sort());
      expect(claims.map((c) => JSON.parse(c.input))).toEqual(claims.map(() => ({ fail: 'never' })));
      expect(await previous.complete(claims.map((claim) => ({ claim, result: { by: 'previous', attempt: claim.attempt } })))).toEqual(
        claims.map(() => 1),
      );
      for (const handle of handles) expect(await handle.result({ timeoutMs: 5_000 })).toEqual({ by: 'previous', attempt: 1 });

      // The previous release's runs, claimed by this release's worker.
      const old = ['p1', 'p2', 'p3'].map((id) => `${id}-${ns}`);
      for (const id of old) expect(await previous.enqueue('lean.flaky', id, { fail: 'first' })).toBe('waiting');
      current = await createApp([FlakyWorkflow], { namespace: ns });
      for (const id of old) expect(await current.client.wait(id, { timeoutMs: 10_000 })).toEqual({ attempt: 2 });

      // Asked for layout 4 once the fleet is upgraded: new runs are lean (a process booted before
      // the move keeps writing full records until it restarts; both read the same).
      await expect(current.client.migrate({ to: CURRENT_LAYOUT })).resolves.toMatchObject({ from: 3, to: CURRENT_LAYOUT, migrated: true });
      // The process that moved it follows at once.
      const own = await current.client.enqueue(FlakyWorkflow, { fail: 'never' });
      expect(await redis.hexists(l3.run(own.id), 'createdAt')).toBe(0);
      const restarted = await createApp([FlakyWorkflow], { namespace: ns, worker: { enabled: false } });
      try {
        const lean = await restarted.client.enqueue(FlakyWorkflow, { fail: 'never' });
        // (The running worker may have claimed it already: claims add token, attempts, startedAt.)
        const fields = Object.keys(await redis.hgetall(l3.run(lean.id)));
        expect(fields).toEqual(expect.arrayContaining(['input', 'state', 'workflow']));
        expect(fields.filter((field) => [...DERIVED, 'createdAt'].includes(field) && !['token', 'attempts'].includes(field))).toEqual([]);
        expect(await lean.result({ timeoutMs: 10_000 })).toEqual({ attempt: 1 });
      } finally {
        await restarted.close();
      }
    } finally {
      await current?.close();
      await app.close();
      await dropNamespace(redis, ns);
    }
  });
});
