import type Redis from 'ioredis';
import { RunContext, RunNotFoundError, WaitTimeoutError, Workflow } from '../../lib';
import { SLOT_GUARD_KEYS } from '../../lib/redis/lua.scripts';
import { createApp, dropNamespace, rawRedis, testCluster, TestApp, uniqueNamespace } from '../support/app';
import { channelSubscribers, publishOn } from '../support/pubsub';
import { Counter, Gates, monitorCommands, pollUntil } from '../support/workflows';

const executions = new Counter();
const gates = new Gates();

@Workflow('client.echo')
class EchoWorkflow {
  async run(input: { value: number }, ctx: RunContext): Promise<{ doubled: number; runId: string }> {
    executions.inc(ctx.runId);
    return { doubled: input.value * 2, runId: ctx.runId };
  }
}

@Workflow('client.gate')
class GateWorkflow {
  async run(input: { key: string }, ctx: RunContext): Promise<string> {
    executions.inc(ctx.runId);
    await gates.get(input.key).promise;
    return `opened ${input.key}`;
  }
}

const unique = (label: string) => `${label}-${Math.random().toString(36).slice(2)}`;

/** The slot-guard keys a script call declares after its own: on a cluster only (see SLOT_GUARD_KEYS). */
const guardKeys = () => (testCluster() ? SLOT_GUARD_KEYS : 0);

describe('QueueClient (worker app)', () => {
  let t: TestApp;
  let namespace: string;
  let redis: Redis;

  beforeAll(async () => {
    namespace = uniqueNamespace('client');
    t = await createApp([EchoWorkflow, GateWorkflow], { namespace });
    redis = rawRedis();
  });
  afterAll(async () => {
    gates.openAll();
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('enqueue → run → wait returns the result', async () => {
    const handle = await t.client.enqueue(EchoWorkflow, { value: 21 });
    expect(handle.created).toBe(true);
    expect(typeof handle.id).toBe('string');
    await expect(handle.result({ timeoutMs: 10_000 })).resolves.toEqual({ doubled: 42, runId: handle.id });
    await expect(t.client.wait(handle.id, { timeoutMs: 10_000 })).resolves.toEqual({ doubled: 42, runId: handle.id });
  });

  it('run() enqueues and returns the output', async () => {
    const id = unique('run');
    await expect(t.client.run(EchoWorkflow, { value: 5 }, { id, timeoutMs: 10_000 })).resolves.toEqual({ doubled: 10, runId: id });
    expect(executions.get(id)).toBe(1);
  });

  it('a workflow given by name runs too', async () => {
    await expect(t.client.run('client.echo', { value: 1 }, { timeoutMs: 10_000 })).resolves.toMatchObject({ doubled: 2 });
  });

  it('an id is an idempotency key: the second enqueue returns the existing run and ignores its input', async () => {
    const id = unique('idem');
    const first = await t.client.enqueue(EchoWorkflow, { value: 1 }, { id });
    const second = await t.client.enqueue(EchoWorkflow, { value: 999 }, { id });
    expect(first).toMatchObject({ id, created: true });
    expect(second).toMatchObject({ id, created: false });
    await expect(second.result({ timeoutMs: 10_000 })).resolves.toEqual({ doubled: 2, runId: id });

    const third = await t.client.enqueue(EchoWorkflow, { value: 7 }, { id }); // after it finished
    expect(third.created).toBe(false);
    await expect(third.result({ timeoutMs: 10_000 })).resolves.toEqual({ doubled: 2, runId: id });
    expect(executions.get(id)).toBe(1);
    expect((await t.client.get(id))?.input).toEqual({ value: 1 });
  });

  it('enqueueMany enqueues every item in order, idempotently per id', async () => {
    const existing = unique('many-existing');
    await t.client.run(EchoWorkflow, { value: 100 }, { id: existing, timeoutMs: 10_000 });
    const fixed = unique('many');
    const handles = await t.client.enqueueMany(EchoWorkflow, [
      { input: { value: 1 } },
      { input: { value: 2 }, opts: { id: fixed, priority: 3 } },
      { input: { value: 3 }, opts: { id: existing } },
    ]);
    expect(handles.map((h) => h.created)).toEqual([true, true, false]);
    expect(handles[1].id).toBe(fixed);
    expect(handles[2].id).toBe(existing);
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })));
    expect(results.map((r) => r.doubled)).toEqual([2, 4, 200]);
    expect(executions.get(existing)).toBe(1);
    expect(await t.client.enqueueMany(EchoWorkflow, [])).toEqual([]);
  });

  it('get() shows state, attempts, timestamps and the result', async () => {
    const key = unique('get');
    const before = Date.now();
    const handle = await t.client.enqueue(GateWorkflow, { key }, { priority: 7, group: 'tenant-1' });
    const active = await pollUntil(
      () => t.client.get(handle.id),
      (info) => info?.state === 'active',
      'the run to become active',
    );
    expect(active).toMatchObject({
      id: handle.id,
      workflow: 'client.gate',
      state: 'active',
      input: { key },
      priority: 7,
      group: 'tenant-1',
      attempts: 1,
      failures: 0,
    });
    expect(active!.maxAttempts).toBe(3);
    expect(active!.startedAt).toBeInstanceOf(Date);
    expect(active!.finishedAt).toBeUndefined();
    expect(active!.result).toBeUndefined();

    gates.open(key);
    await expect(handle.result({ timeoutMs: 10_000 })).resolves.toBe(`opened ${key}`);
    const after = Date.now();
    const done = await t.client.get(handle.id);
    expect(done).toMatchObject({ state: 'completed', attempts: 1, failures: 0, result: `opened ${key}` });
    expect(done!.error).toBeUndefined();
    const { createdAt, dueAt, startedAt, finishedAt } = done!;
    expect(createdAt.getTime()).toBeGreaterThanOrEqual(before - 5);
    expect(dueAt.getTime()).toBe(createdAt.getTime());
    expect(startedAt!.getTime()).toBeGreaterThanOrEqual(createdAt.getTime());
    expect(finishedAt!.getTime()).toBeGreaterThanOrEqual(startedAt!.getTime());
    expect(finishedAt!.getTime()).toBeLessThanOrEqual(after + 5);
  });

  it('get() of an unknown id is null', async () => {
    await expect(t.client.get(unique('missing'))).resolves.toBeNull();
  });

  it('wait on an already finished run resolves from the stored result', async () => {
    const id = unique('finished');
    await t.client.run(EchoWorkflow, { value: 4 }, { id, timeoutMs: 10_000 });
    expect((await t.client.get(id))?.state).toBe('completed');
    // Nothing will be published any more: only the read after subscribing can resolve this
    // (the timeout is far below the waiter's 10 s backstop re-read).
    await expect(t.client.wait(id, { timeoutMs: 2_000 })).resolves.toEqual({ doubled: 8, runId: id });
  });

  it('wait gives up with WaitTimeoutError; the run carries on', async () => {
    const key = unique('timeout');
    const handle = await t.client.enqueue(GateWorkflow, { key });
    const error = await handle.result({ timeoutMs: 150 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitTimeoutError);
    expect(error).toMatchObject({ runId: handle.id, timeoutMs: 150 });
    const pending = t.client.wait(handle.id, { timeoutMs: 10_000 });
    gates.open(key);
    await expect(pending).resolves.toBe(`opened ${key}`);
    expect(executions.get(handle.id)).toBe(1);
  });

  it('wait on an unknown id rejects with RunNotFoundError', async () => {
    const id = unique('unknown');
    const error = await t.client.wait(id, { timeoutMs: 5_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RunNotFoundError);
    expect((error as RunNotFoundError).runId).toBe(id);
  });
});

describe('QueueClient.wait and a legacy bare "1" publish (producer-only app)', () => {
  let t: TestApp;
  let namespace: string;
  let redis: Redis;

  beforeAll(async () => {
    namespace = uniqueNamespace('legacy');
    t = await createApp([EchoWorkflow], { namespace, worker: { enabled: false } });
    redis = rawRedis();
  });
  afterAll(async () => {
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('re-reads the stored record on "1": keeps waiting while it is still waiting, resolves once it is completed', async () => {
    const id = unique('legacy');
    const runKey = `{sluice:${namespace}}:run:${id}`;
    const channel = `{sluice:${namespace}}:done:${id}`;
    const isWaiterRead = (args: string[]) => args[0] === 'hmget' && args[1] === runKey && args[2] === 'state';
    await redis.hset(runKey, 'workflow', 'client.echo', 'state', 'waiting', 'attempts', '0', 'createdAt', String(Date.now()));

    const monitor = await monitorCommands(namespace);
    try {
      let settled = false;
      const waited = t.client.wait(id, { timeoutMs: 8_000 }).finally(() => (settled = true));
      await pollUntil(
        () => channelSubscribers(redis, channel),
        (n) => n === 1,
        'the waiter to subscribe',
      );
      await monitor.next(isWaiterRead); // the read right after subscribing: still waiting

      expect(await publishOn(redis, channel, '1')).toBe(1);
      await monitor.next(isWaiterRead); // the "1" made it re-read the record, which is still waiting
      expect(settled).toBe(false);

      await redis.hset(runKey, 'state', 'completed', 'result', '"legacy"', 'finishedAt', String(Date.now()));
      expect(await publishOn(redis, channel, '1')).toBe(1);
      await expect(waited).resolves.toBe('legacy');
    } finally {
      await monitor.close();
    }
  });

  it("a waiter's read of the record is one HMGET (and an HSET of 'waited' the first time): the test above counts reads", async () => {
    const id = unique('one-read');
    const runKey = `{sluice:${namespace}}:run:${id}`;
    await redis.hset(runKey, 'workflow', 'client.echo', 'state', 'waiting', 'attempts', '0', 'createdAt', String(Date.now()));
    const monitor = await monitorCommands(namespace);
    try {
      const commandsOfReads = async () => {
        await expect(t.client.wait(id, { timeoutMs: 1 })).rejects.toBeInstanceOf(WaitTimeoutError);
        // A read of a key of the namespace's slot, sent after the wait settled: seen after its read.
        const marker = `{sluice:${namespace}}:${unique('marker')}`;
        await redis.get(marker);
        const seen: string[] = [];
        for (;;) {
          const args = await monitor.next((a) => a[1] === runKey || (a[0] === 'get' && a[1] === marker));
          if (args[1] === marker) return seen;
          seen.push(args[0]);
        }
      };
      expect(await commandsOfReads()).toEqual(['hmget', 'hset']); // marked as waited on its done channel
      expect(await commandsOfReads()).toEqual(['hmget']); // marked already
    } finally {
      await monitor.close();
    }
  });

  it('a producer-only app enqueues but runs nothing', async () => {
    const handle = await t.client.enqueue(EchoWorkflow, { value: 1 });
    expect((await t.client.get(handle.id))?.state).toBe('waiting');
    await expect(handle.result({ timeoutMs: 200 })).rejects.toBeInstanceOf(WaitTimeoutError);
    expect(executions.get(handle.id)).toBe(0);
    expect((await t.client.get(handle.id))?.state).toBe('waiting');
  });

  it('concurrent enqueue() calls share script calls; one id enqueued by several at once is created once', async () => {
    const base = `{sluice:${namespace}}:`;
    const isChunkCall = (args: string[]) => args[0] === 'fcall' && args[2] === String(3 + guardKeys()) && args[3] === `${base}leases`;
    await t.client.enqueueMany(EchoWorkflow, [{ input: { value: 0 } }]); // the function library is loaded (a first call on a new server loads it)
    const monitor = await monitorCommands(namespace);
    try {
      const shared = unique('shared');
      const handles = await Promise.all([
        ...Array.from({ length: 100 }, (_, i) => t.client.enqueue(EchoWorkflow, { value: i })),
        ...Array.from({ length: 5 }, (_, i) => t.client.enqueue(EchoWorkflow, { value: 1_000 + i }, { id: shared })),
      ]);
      expect(new Set(handles.slice(0, 100).map((h) => h.id)).size).toBe(100);
      expect(handles.slice(0, 100).every((h) => h.created)).toBe(true);
      expect(handles.slice(100).filter((h) => h.created)).toHaveLength(1);
      const sharedInput = (await t.client.get(shared))?.input as { value: number };
      expect(sharedInput.value).toBeGreaterThanOrEqual(1_000);
      const infos = await Promise.all(handles.slice(0, 100).map((h) => t.client.get(h.id)));
      expect(infos.map((info) => (info?.input as { value: number }).value)).toEqual(Array.from({ length: 100 }, (_, i) => i));

      // A read of a key of the namespace's slot (on a cluster, the node the monitor watches): it
      // is seen after every command the call above made.
      const marker = `${base}${unique('marker')}`;
      await redis.get(marker);
      await monitor.next((args) => args[0] === 'get' && args[1] === marker);
      await monitor.next(isChunkCall, 1); // at least one call carried several runs
    } finally {
      await monitor.close();
    }
  });

  it('enqueueMany stores a batch in one script call per chunk of 500 runs, each run as enqueue() would', async () => {
    const existing = (await t.client.enqueue(EchoWorkflow, { value: -1 })).id;
    // Loads the function library first: a first call on a new server is refused, the library loads, the call goes again.
    await t.client.enqueueMany(EchoWorkflow, [{ input: { value: -2 }, opts: { delayMs: 60_000 } }]);
    const base = `{sluice:${namespace}}:`;
    const isChunkCall = (args: string[]) =>
      args[0] === 'fcall' && args[2] === String(3 + guardKeys()) && args[3] === `${base}leases` && args[7 + guardKeys()] === 'client.echo';
    const items = Array.from({ length: 1_201 }, (_, i) => ({
      input: { value: i },
      opts:
        i === 600
          ? { id: existing }
          : i % 100 === 1
            ? { priority: 5 }
            : i % 100 === 2
              ? { delayMs: 60_000 }
              : i % 100 === 3
                ? { group: 'tenant-a' }
                : undefined,
    }));
    const monitor = await monitorCommands(namespace);
    try {
      const handles = await t.client.enqueueMany(EchoWorkflow, items);
      // A read of a key of the namespace's slot (on a cluster, the node the monitor watches): it
      // is seen after every command the call above made.
      const marker = `${base}${unique('marker')}`;
      await redis.get(marker);
      await monitor.next((args) => args[0] === 'get' && args[1] === marker);
      for (let chunk = 0; chunk < 3; chunk++) await monitor.next(isChunkCall, 1);
      await expect(monitor.next(isChunkCall, 1)).rejects.toThrow(/no matching command/);

      expect(handles.map((h) => h.created)).toEqual(items.map((_, i) => i !== 600));
      expect(handles[600].id).toBe(existing);
      const infos = await Promise.all([1, 2, 3, 4, 1_200].map((i) => t.client.get(handles[i].id)));
      expect(infos.map((info) => [info?.state, info?.priority, info?.group])).toEqual([
        ['waiting', 5, undefined],
        ['delayed', 0, undefined],
        ['waiting', 0, 'tenant-a'],
        ['waiting', 0, undefined],
        ['waiting', 0, undefined],
      ]);
      // FIFO within a priority: the plain runs are queued in the batch's order, after the earlier run.
      const queued = await redis.lrange(`${base}wf:client.echo:queue`, 0, -1);
      const plain = handles.filter((_, i) => i !== 600 && ![1, 2, 3].includes(i % 100)).map((h) => h.id);
      expect(queued.slice(queued.indexOf(existing))).toEqual([existing, ...plain]);
      expect((await t.client.get(existing))?.input).toEqual({ value: -1 });
    } finally {
      await monitor.close();
    }
  });

  it("enqueueMany sends the options a chunk's runs share once, and every run gets them", async () => {
    const base = `{sluice:${namespace}}:`;
    const isChunkCall = (args: string[]) =>
      args[0] === 'fcall' && args[2] === String(3 + guardKeys()) && args[3] === `${base}leases` && args[7 + guardKeys()] === 'client.echo';
    const opts = { priority: 7, group: 'tenant-s', attempts: 4, runTimeoutMs: 90_000, delayMs: 60_000 };
    const monitor = await monitorCommands(namespace);
    try {
      const handles = await t.client.enqueueMany(
        EchoWorkflow,
        [1, 2, 3].map((value) => ({ input: { value }, opts })),
      );
      const call = await monitor.next(isChunkCall);
      // ARGV[7] = 2 values per run, after the six shared options (see lua/enqueue-many.lua).
      expect(call.slice(12 + guardKeys(), 19 + guardKeys())).toEqual(['2', '7', '60000', '', '4', 'tenant-s', '90000']);
      expect(call.slice(19 + guardKeys())).toEqual(handles.flatMap((h, i) => [h.id, JSON.stringify({ value: i + 1 })]));
      const infos = await Promise.all(handles.map((h) => t.client.get(h.id)));
      for (const info of infos) expect(info).toMatchObject({ state: 'delayed', priority: 7, group: 'tenant-s', maxAttempts: 4 });
      const raw = await Promise.all(handles.map((h) => redis.hget(`${base}run:${h.id}`, 'timeoutMs')));
      expect(raw).toEqual(['90000', '90000', '90000']);
    } finally {
      await monitor.close();
    }
  });
});
