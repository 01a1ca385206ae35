import {
  BatchContext,
  EnqueueOptions,
  InvalidOptionError,
  NonRetryableError,
  QueueClient,
  RunCancelledError,
  RunContext,
  Step,
  Workflow,
  UnknownWorkflowError,
  WaitTimeoutError,
  WorkflowFailedError,
} from '../../lib';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { rejection } from '../support/rejection';

/** Every call of each batch workflow's run, in order: the member ids it got. */
const calls = new Map<string, string[][]>();
const record = (name: string, ids: readonly string[]) => {
  if (!calls.has(name)) calls.set(name, []);
  calls.get(name)!.push([...ids]);
};

@Workflow('batch.square', { batch: { maxSize: 5, maxWaitMs: 300 } })
class SquareBatch {
  async run(inputs: number[], ctx: BatchContext<number>) {
    record('square', ctx.batch.memberIds);
    return inputs.map((n) => n * n);
  }
}

@Workflow('batch.keyed', { batch: { maxSize: 3, maxWaitMs: 200, key: (input: { tenant: string }) => input.tenant } })
class KeyedBatch {
  async run(inputs: Array<{ tenant: string; n: number }>, ctx: BatchContext) {
    record('keyed', ctx.batch.memberIds);
    if (new Set(inputs.map((i) => i.tenant)).size !== 1) throw new NonRetryableError('mixed tenants in one batch');
    return inputs.map((i) => `${i.tenant}:${i.n}`);
  }
}

/** Fails its first attempt after a memoized step: the retry runs the same batch, the step replayed. */
let flakySteps = 0;
@Workflow('batch.flaky', { batch: { maxSize: 4, maxWaitMs: 100 }, attempts: 3, backoff: { delayMs: 10 } })
class FlakyBatch {
  async run(inputs: string[], ctx: BatchContext<string>) {
    record('flaky', ctx.batch.memberIds);
    const tag = await this.tag(inputs.length);
    if (ctx.attempt === 1) throw new Error('first attempt fails');
    return inputs.map((s) => `${s}-${tag}`);
  }
  @Step() async tag(size: number) {
    flakySteps++;
    return `n${size}`;
  }
}

@Workflow('batch.broken', { batch: { maxSize: 2, maxWaitMs: 50 }, attempts: 3 })
class BrokenBatch {
  async run(inputs: string[], _ctx: BatchContext) {
    return inputs.slice(1); // one result short
  }
}

@Workflow('batch.single', { batch: { maxSize: 1, maxWaitMs: 60_000 } })
class SingleBatch {
  async run(inputs: string[], ctx: BatchContext) {
    record('single', ctx.batch.memberIds);
    return inputs.map((s) => `${s}!`);
  }
}

@Workflow('batch.grouped', { batch: { maxSize: 4, maxWaitMs: 150 } })
class GroupedBatch {
  async run(inputs: Array<{ g: string }>, ctx: BatchContext) {
    record('grouped', ctx.batch.memberIds);
    if (new Set(inputs.map((i) => i.g)).size !== 1) throw new NonRetryableError('mixed groups in one batch');
    return inputs.map((i) => i.g);
  }
}

/** Invokes a batch workflow as a child: refused (a child run would be queued where no batch worker looks). */
@Workflow('batch.parent', { attempts: 1 })
class InvokesBatch {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.invoke(SquareBatch, 3);
  }
}

@Workflow('batch.slow', { batch: { maxSize: 10, maxWaitMs: 60_000 } })
class SlowBatch {
  async run(inputs: string[], _ctx: BatchContext) {
    return inputs.map((s) => s.toUpperCase());
  }
}

/** An older release's worker: the same name as a plain workflow. It must never see a batch. */
const plainCalls: unknown[] = [];
@Workflow('batch.legacy')
class LegacyPlain {
  async run(input: unknown, _ctx: RunContext) {
    plainCalls.push(input);
    return 'plain';
  }
}
@Workflow('batch.legacy', { batch: { maxSize: 2, maxWaitMs: 100 } })
class LegacyBatch {
  async run(inputs: string[], _ctx: BatchContext) {
    return inputs.map((s) => `batched ${s}`);
  }
}

describe('batches', () => {
  let t: TestApp;
  let producer: TestApp;
  let client: QueueClient;
  const namespace = uniqueNamespace('batch');
  const redis = rawRedis();
  const base = `{sluice:${namespace}}:`;

  beforeAll(async () => {
    t = await createApp([SquareBatch, KeyedBatch, FlakyBatch, BrokenBatch, SlowBatch, SingleBatch, GroupedBatch, InvokesBatch], {
      namespace,
      worker: { concurrency: 8 },
    });
    producer = await createApp([], { namespace, worker: { enabled: false } });
    client = t.client;
  });
  afterAll(async () => {
    await producer.close();
    await t.close();
    await dropNamespace(redis, namespace);
    redis.disconnect();
  });

  it('runs each member with its own id and result, in batches of at most maxSize', async () => {
    const results = await Promise.all([1, 2, 3, 4, 5, 6, 7].map((n) => client.run(SquareBatch, n, { timeoutMs: 10_000 })));
    expect(results).toEqual([1, 4, 9, 16, 25, 36, 49]);
    const batches = calls.get('square')!;
    expect(new Set(batches.flat()).size).toBe(7);
    for (const batch of batches) expect(batch.length).toBeLessThanOrEqual(5);
    // Types: one member's input in, one member's output back.
    const typed: number = await client.run(SquareBatch, 8, { timeoutMs: 10_000 });
    expect(typed).toBe(64);
    // @ts-expect-error -- a member's input, not the batch's array
    await expect(client.enqueue(SquareBatch, [1, 2], { id: 'typed-x' })).resolves.toBeDefined();
  });

  it('many concurrent enqueues from two processes: none lost, none in two batches, sizes <= maxSize', async () => {
    calls.delete('square');
    const n = 300;
    const handles = await Promise.all(
      Array.from({ length: n }, (_, i) => (i % 2 ? producer.client : client).enqueue(SquareBatch, i, { id: `race-${i}` })),
    );
    expect(handles.every((h) => h.created)).toBe(true);
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 20_000 })));
    expect(results).toEqual(Array.from({ length: n }, (_, i) => i * i));
    // Each member is in exactly one batch's member list, and that batch is the one its record names.
    const seen = new Map<string, string>();
    for (let i = 0; i < n; i++) {
      const info = await client.get(`race-${i}`);
      expect(info).toMatchObject({ state: 'completed', result: i * i, workflow: 'batch.square' });
      const members = await client.batchMembers(info!.batch!);
      expect(members).toContain(`race-${i}`);
      expect(members!.length).toBeLessThanOrEqual(5);
      for (const id of members!.filter((m) => m.startsWith('race-'))) {
        expect(seen.get(id) ?? info!.batch).toBe(info!.batch);
        seen.set(id, info!.batch!);
      }
    }
    expect(seen.size).toBe(n);
    // The handler saw every member once (no retries here): no member ran twice.
    const ran = calls
      .get('square')!
      .flat()
      .filter((id) => id.startsWith('race-'));
    expect(ran).toHaveLength(n);
    expect(new Set(ran).size).toBe(n);
  });

  it('a partial batch starts once maxWaitMs has passed since its first member', async () => {
    const [a, b] = await Promise.all([
      client.enqueue(SquareBatch, 10, { id: 'partial-a' }),
      client.enqueue(SquareBatch, 11, { id: 'partial-b' }),
    ]);
    expect(await Promise.all([a.result({ timeoutMs: 10_000 }), b.result({ timeoutMs: 10_000 })])).toEqual([100, 121]);
    const member = (await client.get('partial-a'))!;
    const batch = (await client.get(member.batch!))!;
    expect(batch).toMatchObject({ workflow: 'batch.square.batch', batchOf: 'batch.square', state: 'completed', result: 2 });
    expect(await client.batchMembers(batch.id)).toEqual(['partial-a', 'partial-b']);
    // Redis's clock throughout: the member's creation and the batch's start.
    expect(batch.startedAt!.getTime() - member.createdAt.getTime()).toBeGreaterThanOrEqual(300);
  });

  it('forms batches per key (batch.key): members of two keys never share one', async () => {
    const inputs = Array.from({ length: 12 }, (_, i) => ({ tenant: i % 2 ? 'acme' : 'globex', n: i }));
    const results = await Promise.all(inputs.map((input) => client.run(KeyedBatch, input, { timeoutMs: 10_000 })));
    expect(results).toEqual(inputs.map((i) => `${i.tenant}:${i.n}`));
    for (const batch of calls.get('keyed')!) expect(batch.length).toBeLessThanOrEqual(3);
  });

  it('enqueueMany makes members; maxSize 1 starts each at once; without batch.key, the group is the key', async () => {
    const many = await client.enqueueMany(SingleBatch, [{ input: 'a', opts: { id: 'one-a' } }, { input: 'b' }, { input: 'c' }]);
    expect(many.map((h) => h.created)).toEqual([true, true, true]);
    expect(await Promise.all(many.map((h) => h.result({ timeoutMs: 10_000 })))).toEqual(['a!', 'b!', 'c!']);
    expect(calls.get('single')!.every((batch) => batch.length === 1)).toBe(true);
    // The same id again: the existing member, nothing written.
    expect((await client.enqueue(SingleBatch, 'z', { id: 'one-a' })).created).toBe(false);
    // One bad item: nothing written.
    await expect(
      client.enqueueMany(SingleBatch, [
        { input: 'ok', opts: { id: 'never-1' } },
        { input: 'x', opts: { delayMs: 5 } },
      ]),
    ).rejects.toThrow(InvalidOptionError);
    expect(await client.get('never-1')).toBeNull();

    const grouped = Array.from({ length: 10 }, (_, i) => ({ g: i % 2 ? 'even' : 'odd' }));
    const out = await Promise.all(grouped.map((input) => client.run(GroupedBatch, input, { group: input.g, timeoutMs: 10_000 })));
    expect(out).toEqual(grouped.map((i) => i.g));
    const member = (await client.get((await client.enqueue(GroupedBatch, { g: 'odd' }, { group: 'odd', id: 'grouped-x' })).id))!;
    expect((await client.get(member.batch!))!.group).toBe('odd');
  });

  it('retries a failed batch as a batch: the same members, its steps replayed from the memo', async () => {
    const ids = ['flaky-a', 'flaky-b', 'flaky-c', 'flaky-d'];
    const results = await Promise.all(ids.map((id) => client.run(FlakyBatch, id, { id, timeoutMs: 10_000 })));
    expect(results).toEqual(ids.map((id) => `${id}-n4`));
    const runs = calls.get('flaky')!;
    expect(runs).toHaveLength(2);
    expect(runs[1]).toEqual(runs[0]);
    const batch = (await client.get((await client.get('flaky-a'))!.batch!))!;
    expect(flakySteps).toBe(1);
    expect(batch).toMatchObject({ state: 'completed', attempts: 2, failures: 1 });
  });

  it('fails each member, without retries, when run returns the wrong number of results', async () => {
    const [a, b] = await Promise.all([
      rejection(() => client.run(BrokenBatch, 'x', { id: 'broken-a', timeoutMs: 10_000 })),
      rejection(() => client.run(BrokenBatch, 'y', { id: 'broken-b', timeoutMs: 10_000 })),
    ]);
    for (const error of [a, b]) {
      expect(error).toBeInstanceOf(WorkflowFailedError);
      expect((error as WorkflowFailedError).causeName).toBe('BatchOutputError');
    }
    const member = (await client.get('broken-a'))!;
    expect(member.state).toBe('failed');
    expect(member.error!.message).toMatch(/got 1 result\(s\) for 2 input\(s\)/);
    expect(await client.get(member.batch!)).toMatchObject({ state: 'failed', attempts: 1 });
    const failed = await client.listRuns({ workflow: BrokenBatch, state: 'failed' });
    expect(failed.runs.map((r) => r.id).sort()).toEqual(['broken-a', 'broken-b']);
  });

  it('a member cancelled while its batch is open is left out; cancelling the batch cancels its members', async () => {
    const a = await client.enqueue(SlowBatch, 'a', { id: 'slow-a' });
    await client.enqueue(SlowBatch, 'b', { id: 'slow-b' });
    const open = (await client.get('slow-a'))!;
    expect(open).toMatchObject({ state: 'batched', input: 'a' });
    expect(await client.cancel(a.id)).toMatchObject({ cancelled: true, state: 'batched' });
    // The batch is full at its 10th member (a's place included): due at once, run without a.
    const rest = await Promise.all(Array.from({ length: 8 }, (_, i) => client.enqueue(SlowBatch, `m${i}`, { id: `slow-m${i}` })));
    expect(await client.wait('slow-b', { timeoutMs: 10_000 })).toBe('B');
    expect(await Promise.all(rest.map((h) => h.result({ timeoutMs: 10_000 })))).toEqual(Array.from({ length: 8 }, (_, i) => `M${i}`));
    expect(await client.get('slow-a')).toMatchObject({ state: 'cancelled', batch: open.batch });
    expect((await client.get(open.batch!))!.result).toBe(9);
    // The next member opens a new batch (60 s wait): cancelling that batch ends its member too.
    const late = await client.enqueue(SlowBatch, 'late', { id: 'slow-late' });
    const lateBatch = (await client.get(late.id))!.batch!;
    expect(lateBatch).not.toBe(open.batch);
    expect(await client.cancel(lateBatch)).toMatchObject({ cancelled: true, state: 'delayed' });
    await expect(late.result({ timeoutMs: 5_000 })).rejects.toBeInstanceOf(RunCancelledError);
  });

  it('counts members under their workflow and batches under <name>.batch', async () => {
    const members = await client.stats({ workflow: SquareBatch });
    const batches = await client.stats({ workflow: 'batch.square.batch' });
    expect(members.workflows['batch.square'].completed).toBeGreaterThanOrEqual(300);
    expect(batches.workflows['batch.square.batch'].completed).toBeGreaterThanOrEqual(60);
    expect(batches.workflows['batch.square.batch'].completed).toBeLessThan(members.workflows['batch.square'].completed);
  });

  it('refuses what a member cannot have, before any Redis call', async () => {
    await expect(client.enqueue(SquareBatch, 1, { delayMs: 10 })).rejects.toThrow(InvalidOptionError);
    await expect(client.enqueue(SquareBatch, 1, { priority: 3 })).rejects.toThrow(/starts and retries with its batch/);
    await expect(client.enqueue(KeyedBatch, { tenant: 'no spaces', n: 1 })).rejects.toThrow(/batch\.key\(input\)/);
    await expect(client.enqueue(SquareBatch, 1, { bogus: 1 } as EnqueueOptions)).rejects.toThrow(InvalidOptionError);
    expect(() => Workflow('batch.bad', { batch: { maxSize: 0, maxWaitMs: 10 } })).toThrow(/maxSize/);
    expect(() => Workflow('batch.bad', { batch: { maxSize: 2, maxWaitMs: 10, maxWait: 1 } as never })).toThrow(/did you mean/);
    expect(() => Workflow('batch.bad', { batch: { maxSize: 2, maxWaitMs: 10 }, schedules: [{ cron: '* * * * *' }] })).toThrow(
      /cannot be combined with batch/,
    );
    for (const other of [{ dedupe: { key: () => 'k', ttlMs: 1_000, mode: 'throttle' as const } }, { on: 'batch.event' }])
      expect(() => Workflow('batch.bad', { batch: { maxSize: 2, maxWaitMs: 10 }, ...other })).toThrow(/cannot be combined with batch/);
    await expect(client.enqueue(SquareBatch, 1, { dedupe: { key: 'k', ttlMs: 1_000, mode: 'throttle' } })).rejects.toThrow(
      /opts\.dedupe: a member of batch workflow "batch\.square" joins its open batch/,
    );
    // By name alone, a producer cannot know the batch settings: refused, nothing written.
    await expect(producer.client.enqueue('batch.square', 1, { id: 'by-name' })).rejects.toBeInstanceOf(UnknownWorkflowError);
    expect(await client.get('by-name')).toBeNull();
    await expect(client.schedule('batch-cron', SquareBatch, { cron: '* * * * *', input: 1 })).rejects.toThrow(/is a batch workflow/);
    const invoked = await rejection(() => client.run(InvokesBatch, null, { timeoutMs: 10_000 }));
    expect(invoked).toBeInstanceOf(WorkflowFailedError);
    expect((invoked as WorkflowFailedError).causeMessage).toMatch(/ctx\.invoke workflow: "batch\.square" is a batch workflow/);
    expect(await redis.exists(`${base}run:typed-x`)).toBe(1); // (the typed enqueue above did write)
  });

  it('a batch that stalls past maxStalls fails for good, and each of its members with it', async () => {
    const ns = uniqueNamespace('batch-stall');
    const nsBase = `{sluice:${ns}}:`;
    const only = await createApp([], { namespace: ns, worker: { enabled: false } });
    let worker: TestApp | undefined;
    try {
      const handles = await Promise.all(['s1', 's2'].map((id) => only.client.enqueue(SlowBatch, id, { id })));
      const batchId = (await only.client.get('s1'))!.batch!;
      // As a worker that died holding it, the last of its allowed stalls: leased, the lease expired.
      await redis.zrem(`${nsBase}wf:batch.slow.batch:delayed`, batchId);
      await redis.hset(`${nsBase}run:${batchId}`, 'state', 'active', 'attempts', '3', 'stalls', '3', 'token', '7');
      await redis.zadd(`${nsBase}leases`, 1, batchId);
      await redis.sadd(`${nsBase}wf:batch.slow.batch:active`, batchId);
      worker = await createApp([SlowBatch], { namespace: ns, worker: { lockMs: 500, stalledIntervalMs: 100, maxStalls: 3 } });
      for (const h of handles) {
        const error = await rejection(() => h.result({ timeoutMs: 10_000 }));
        expect(error).toBeInstanceOf(WorkflowFailedError);
        expect((error as WorkflowFailedError).causeName).toBe('StalledError');
      }
      expect(await only.client.get(batchId)).toMatchObject({ state: 'failed', error: { name: 'StalledError' } });
      const failed = await only.client.listRuns({ workflow: SlowBatch, state: 'failed' });
      expect(failed.runs.map((r) => r.id).sort()).toEqual(['s1', 's2']);
    } finally {
      await worker?.close();
      await only.close();
      await dropNamespace(redis, ns);
    }
  });

  it('workers that do not declare the batch workflow never claim a batch; one that does runs it', async () => {
    const ns = uniqueNamespace('batch-old');
    const old = await createApp([LegacyPlain], { namespace: ns });
    const batchProducer = await createApp([], { namespace: ns, worker: { enabled: false } });
    try {
      const h = await batchProducer.client.enqueue(LegacyBatch, 'x', { id: 'legacy-x' });
      const batchId = (await batchProducer.client.get(h.id))!.batch!;
      // Past the max wait the batch is due, under 'batch.legacy.batch': the older worker claims
      // only 'batch.legacy', so it stays waiting until a worker that declares the batch boots.
      await expect(h.result({ timeoutMs: 800 })).rejects.toBeInstanceOf(WaitTimeoutError);
      expect(plainCalls).toEqual([]);
      expect((await old.client.get(batchId))!.state).toMatch(/delayed|waiting/);
      const current = await createApp([LegacyBatch], { namespace: ns });
      try {
        expect(await h.result({ timeoutMs: 10_000 })).toBe('batched x');
      } finally {
        await current.close();
      }
      expect(plainCalls).toEqual([]);
    } finally {
      await batchProducer.close();
      await old.close();
      await dropNamespace(redis, ns);
    }
  });
});
