import type Redis from 'ioredis';
import { InvalidNameError, InvalidOptionError, RunCancelledError, RunContext, type DedupeOptions, Workflow } from '../../lib';
import { scriptsOn } from '../support/scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Gates, monitorCommands, pollUntil } from '../support/workflows';

jest.setTimeout(60_000);

/** Inputs each run started with, by run id (attempts of one run count once per attempt). */
const executions = new Map<string, unknown[]>();
const gates = new Gates();

@Workflow('dd.echo', { attempts: 1 })
class Echo {
  async run(input: { n: number; gate?: string }, ctx: RunContext) {
    executions.set(ctx.runId, [...(executions.get(ctx.runId) ?? []), input]);
    if (input.gate) await gates.get(input.gate).promise;
    return input;
  }
}

@Workflow('dd.declared', { attempts: 1, dedupe: { key: (input: { user: string }) => input.user, ttlMs: 60_000, mode: 'throttle' } })
class Declared {
  async run(input: { user: string; n: number }) {
    return input;
  }
}

/**
 * Debounce and throttle per key (EnqueueOptions.dedupe, lua/enqueue-dedupe.lua): the window is
 * decided in Redis, so however many enqueues race with one key, one run comes out.
 */
describe('dedupe', () => {
  const ns = uniqueNamespace('dd');
  const keys = new RedisKeys('sluice', ns);
  let redis: Redis;
  let worker: TestApp;
  let producer: TestApp;
  let second: TestApp;
  let unique = 0;
  const key = (label: string) => `${label}-${++unique}`;

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Echo, Declared], { namespace: ns, worker: { concurrency: 8 } });
    producer = await createApp([Declared], { namespace: ns, worker: { enabled: false } });
    second = await createApp([], { namespace: ns, worker: { enabled: false } });
  });
  afterAll(async () => {
    gates.openAll();
    await worker?.close();
    await producer?.close();
    await second?.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  describe('throttle', () => {
    it('returns the first run to every enqueue in the window; the run holds its first input and the count', async () => {
      const dedupe: DedupeOptions = { key: key('t'), ttlMs: 60_000, mode: 'throttle' };
      const first = await producer.client.enqueue(Echo, { n: 1 }, { dedupe });
      const again = await producer.client.enqueue(Echo, { n: 2 }, { dedupe });
      expect(first.dedupe).toEqual({ outcome: 'created', key: dedupe.key, mode: 'throttle', seq: 1 });
      expect(first.created).toBe(true);
      expect(again).toMatchObject({ id: first.id, created: false, dedupe: { outcome: 'deduplicated', seq: 2 } });
      expect(await again.result({ timeoutMs: 10_000 })).toEqual({ n: 1 });
      const info = await producer.client.get(first.id);
      expect(info?.dedupe).toEqual({ key: dedupe.key, mode: 'throttle', count: 2, inputSeq: 1 });
      // Finished, the run is still the window's: the window is time, not the run's life.
      const late = await producer.client.enqueue(Echo, { n: 3 }, { dedupe });
      expect(late).toMatchObject({ id: first.id, dedupe: { outcome: 'deduplicated', seq: 3 } });
      expect(executions.get(first.id)).toEqual([{ n: 1 }]);
    });

    it('1,000 concurrent enqueues from two processes with one key make exactly one run', async () => {
      const dedupe: DedupeOptions = { key: key('t1000'), ttlMs: 60_000, mode: 'throttle' };
      const handles = await Promise.all(
        Array.from({ length: 1_000 }, (_, n) => (n % 2 ? producer : second).client.enqueue('dd.echo', { n }, { dedupe })),
      );
      const ids = new Set(handles.map((h) => h.id));
      expect(ids.size).toBe(1);
      expect(handles.filter((h) => h.created)).toHaveLength(1);
      // Redis ordered them: every call has its own number, 1 to 1,000.
      expect(handles.map((h) => h.dedupe!.seq).sort((a, b) => a - b)).toEqual(Array.from({ length: 1_000 }, (_, i) => i + 1));
      const [id] = ids;
      const creator = handles.find((h) => h.created)!;
      expect(creator.dedupe!.seq).toBe(1);
      expect(await creator.result({ timeoutMs: 10_000 })).toEqual(executions.get(id)![0]);
      expect(executions.get(id)).toHaveLength(1);
      expect((await producer.client.get(id))?.dedupe).toMatchObject({ count: 1_000, inputSeq: 1 });
    });

    it('opens a new window once the ttl has passed', async () => {
      const dedupe: DedupeOptions = { key: key('tttl'), ttlMs: 150, mode: 'throttle' };
      const first = await producer.client.enqueue(Echo, { n: 1 }, { dedupe });
      await first.result({ timeoutMs: 10_000 });
      // The window is the key's life in Redis: gone, the next enqueue starts a run.
      await pollUntil(
        () => redis.exists(keys.dedupe('dd.echo', dedupe.key)),
        (n) => n === 0,
        'the window to expire',
      );
      const next = await producer.client.enqueue(Echo, { n: 2 }, { dedupe });
      expect(next.id).not.toBe(first.id);
      expect(next.dedupe).toMatchObject({ outcome: 'created', seq: 1 });
      expect(await next.result({ timeoutMs: 10_000 })).toEqual({ n: 2 });
    });

    it('a cancelled run ends its window: the next enqueue starts a new run', async () => {
      const gate = key('gate');
      const dedupe: DedupeOptions = { key: key('tc'), ttlMs: 60_000, mode: 'throttle' };
      const first = await producer.client.enqueue(Echo, { n: 1, gate }, { dedupe });
      await producer.client.cancel(first.id);
      gates.open(gate);
      const next = await producer.client.enqueue(Echo, { n: 2 }, { dedupe });
      expect(next).toMatchObject({ created: true, dedupe: { outcome: 'created' } });
      expect(next.id).not.toBe(first.id);
      expect(await next.result({ timeoutMs: 10_000 })).toEqual({ n: 2 });
    });

    it('run(): every caller gets the one run’s result', async () => {
      const dedupe: DedupeOptions = { key: key('trun'), ttlMs: 60_000, mode: 'throttle' };
      const results = await Promise.all([1, 2, 3, 4].map((n) => producer.client.run(Echo, { n }, { dedupe, timeoutMs: 10_000 })));
      expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    });
  });

  describe('debounce', () => {
    it('1,000 concurrent enqueues make one run, holding the input of the call Redis ordered last', async () => {
      const dedupe: DedupeOptions = { key: key('d1000'), ttlMs: 1_500, mode: 'debounce' };
      const handles = await Promise.all(
        Array.from({ length: 1_000 }, (_, n) => (n % 2 ? producer : second).client.enqueue('dd.echo', { n }, { dedupe })),
      );
      const ids = new Set(handles.map((h) => h.id));
      expect(ids.size).toBe(1);
      expect(handles.filter((h) => h.dedupe!.outcome === 'created')).toHaveLength(1);
      expect(handles.filter((h) => h.dedupe!.outcome === 'replaced')).toHaveLength(999);
      const seqs = handles.map((h) => h.dedupe!.seq);
      expect([...seqs].sort((a, b) => a - b)).toEqual(Array.from({ length: 1_000 }, (_, i) => i + 1));
      const last = seqs.indexOf(1_000);
      const [id] = ids;
      expect(await handles[0].result({ timeoutMs: 20_000 })).toEqual({ n: last });
      expect(executions.get(id)).toEqual([{ n: last }]);
      expect((await producer.client.get(id))?.dedupe).toEqual({ key: dedupe.key, mode: 'debounce', count: 1_000, inputSeq: 1_000 });
    });

    it('delays the run by ttlMs, pushes it back on each enqueue, and keeps the first input with replace: false', async () => {
      const dedupe: DedupeOptions = { key: key('dkeep'), ttlMs: 60_000, mode: 'debounce', replace: false };
      const first = await producer.client.enqueue(Echo, { n: 1 }, { dedupe });
      expect(first.dedupe).toMatchObject({ outcome: 'created' });
      const before = await producer.client.get(first.id);
      expect(before?.state).toBe('delayed');
      const again = await producer.client.enqueue(Echo, { n: 2 }, { dedupe });
      expect(again).toMatchObject({ id: first.id, created: false, dedupe: { outcome: 'deduplicated', seq: 2 } });
      const after = await producer.client.get(first.id);
      expect(after?.input).toEqual({ n: 1 });
      expect(after?.dedupe).toMatchObject({ count: 2, inputSeq: 1 });
      expect(after!.dueAt.getTime()).toBeGreaterThanOrEqual(before!.dueAt.getTime());
      expect(await redis.zscore(keys.workflow('dd.echo', 'delayed'), first.id)).toBe(String(after!.dueAt.getTime()));
      await producer.client.cancel(first.id);
    });

    it('maxWaitMs bounds how far the start is pushed from the first enqueue: a steady stream cannot starve the run', async () => {
      const dedupe: DedupeOptions = { key: key('dmax'), ttlMs: 300, maxWaitMs: 600, mode: 'debounce' };
      const first = await producer.client.enqueue(Echo, { n: 0 }, { dedupe });
      const created = (await producer.client.get(first.id))!.createdAt.getTime();
      // Enqueues every 20 ms, each pushing the start to 300 ms from then: without the bound the run
      // would never start. The stream goes on until it does; each enqueue before that is folded in.
      const dues: number[] = [];
      let n = 0;
      while (!executions.has(first.id) && n < 1_000) {
        const handle = await producer.client.enqueue(Echo, { n: ++n }, { dedupe });
        if (handle.id !== first.id) break; // the run has started: this one opened the next window
        dues.push((await producer.client.get(first.id))!.dueAt.getTime());
        await new Promise((resolve) => setTimeout(resolve, 20)); // pacing the stream, not waiting for an event
      }
      expect(executions.has(first.id) || n < 1_000).toBe(true);
      expect(Math.max(...dues)).toBe(created + 600);
      expect(await first.result({ timeoutMs: 10_000 })).toEqual({ n: dues.length });
    });

    it('a run cancelled (and removed) while pending ends the window: the next enqueue creates a new run', async () => {
      const dedupe: DedupeOptions = { key: key('dcancel'), ttlMs: 60_000, mode: 'debounce' };
      const first = await producer.client.enqueue(Echo, { n: 1 }, { dedupe });
      expect(await producer.client.cancel(first.id)).toMatchObject({ cancelled: true });
      await expect(first.result({ timeoutMs: 5_000 })).rejects.toBeInstanceOf(RunCancelledError);
      const second = await producer.client.enqueue(Echo, { n: 2 }, { dedupe: { ...dedupe, ttlMs: 100 } });
      expect(second).toMatchObject({ created: true, dedupe: { outcome: 'created', seq: 1 } });
      expect(second.id).not.toBe(first.id);
      expect((await producer.client.get(first.id))?.state).toBe('cancelled');
      expect(await second.result({ timeoutMs: 10_000 })).toEqual({ n: 2 });

      const third = await producer.client.enqueue(Echo, { n: 3 }, { dedupe });
      await producer.client.cancel(third.id);
      expect(await producer.client.remove(third.id)).toBe(true);
      const fourth = await producer.client.enqueue(Echo, { n: 4 }, { dedupe: { ...dedupe, ttlMs: 100 } });
      expect(fourth.dedupe).toMatchObject({ outcome: 'created' });
      expect(await fourth.result({ timeoutMs: 10_000 })).toEqual({ n: 4 });
    });

    it('once the run has started, the next enqueue opens a new window', async () => {
      const gate = key('gate');
      const dedupe: DedupeOptions = { key: key('dstart'), ttlMs: 100, mode: 'debounce' };
      const first = await producer.client.enqueue(Echo, { n: 1, gate }, { dedupe });
      await pollUntil(async () => executions.has(first.id), Boolean, 'the run to start');
      const next = await producer.client.enqueue(Echo, { n: 2 }, { dedupe });
      expect(next.dedupe).toMatchObject({ outcome: 'created' });
      expect(next.id).not.toBe(first.id);
      gates.open(gate);
      expect(await first.result({ timeoutMs: 10_000 })).toEqual({ n: 1, gate });
      expect(await next.result({ timeoutMs: 10_000 })).toEqual({ n: 2 });
    });

    it('run(): every caller gets the one run’s result, the last input', async () => {
      const dedupe: DedupeOptions = { key: key('drun'), ttlMs: 300, mode: 'debounce' };
      const calls = [1, 2, 3, 4, 5].map((n) => producer.client.run(Echo, { n }, { dedupe, timeoutMs: 10_000 }));
      const results = await Promise.all(calls);
      expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
      expect(results[0]).toEqual({ n: 5 });
    });

    it('keeps the first call’s group and priority: the run starts in its group', async () => {
      const dedupe: DedupeOptions = { key: key('dgroup'), ttlMs: 100, mode: 'debounce' };
      const first = await producer.client.enqueue(Echo, { n: 1 }, { dedupe, group: 'tenant-a', priority: 5 });
      await producer.client.enqueue(Echo, { n: 2 }, { dedupe, group: 'tenant-b' });
      expect(await first.result({ timeoutMs: 10_000 })).toEqual({ n: 2 });
      expect(await producer.client.get(first.id)).toMatchObject({ group: 'tenant-a', priority: 5 });
    });
  });

  describe('the enqueue fast path', () => {
    const parked = () =>
      pollUntil(
        () => redis.zcard(keys.workflow('dd.echo', 'parked')),
        (n) => n > 0,
        'a worker to park',
      );

    it('may hand a throttled run straight to a parked worker; a debounced one is always delayed', async () => {
      const scripts = scriptsOn(redis, ns);
      const call = (id: string, dedupeKey: string, mode: string) =>
        scripts.run<unknown[]>(
          'enqueue-dedupe',
          [keys.run(id), keys.dedupe('dd.echo', dedupeKey)],
          [
            keys.base,
            id,
            'dd.echo',
            JSON.stringify({ n: 1 }),
            '111',
            30_000,
            `nonce-${id}`,
            mode,
            dedupeKey,
            60_000,
            '1',
            '',
            ...(mode === 'debounce' ? ['delay', 60_000] : []),
          ],
        );
      await parked();
      const fast = key('fast');
      const reply = await call(fast, key('fast-key'), 'throttle');
      // Handed over: the state, then the lease token and the worker's id, as lua/enqueue.lua replies.
      expect(reply.slice(0, 4)).toEqual(['created', fast, 'active', 1]);
      expect(reply).toHaveLength(6);
      expect(await producer.client.wait(fast, { timeoutMs: 10_000 })).toEqual({ n: 1 });

      await parked();
      const slow = key('slow');
      expect(await call(slow, key('slow-key'), 'debounce')).toEqual(['created', slow, 'delayed', 1]);
      await producer.client.cancel(slow);
    });

    it("a run handed to the enqueuing process's own worker starts from the reply", async () => {
      await parked();
      const dedupe: DedupeOptions = { key: key('own'), ttlMs: 60_000, mode: 'throttle' };
      const handle = await worker.client.enqueue(Echo, { n: 7 }, { dedupe });
      expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ n: 7 });
    });
  });

  describe('with an id', () => {
    it('creates the run under the id; later calls get the window’s run; an id that exists is returned as such', async () => {
      const dedupe: DedupeOptions = { key: key('id'), ttlMs: 60_000, mode: 'throttle' };
      const a = key('run-a');
      const first = await producer.client.enqueue(Echo, { n: 1 }, { id: a, dedupe });
      expect(first).toMatchObject({ id: a, created: true, dedupe: { outcome: 'created' } });
      const other = await producer.client.enqueue(Echo, { n: 2 }, { id: key('run-b'), dedupe });
      expect(other).toMatchObject({ id: a, created: false, dedupe: { outcome: 'deduplicated' } });
      const existing = await producer.client.enqueue(Echo, { n: 3 }, { id: a, dedupe: { ...dedupe, key: key('id-other') } });
      expect(existing).toMatchObject({ id: a, created: false, dedupe: { outcome: 'existing', seq: 0 } });
      expect(await first.result({ timeoutMs: 10_000 })).toEqual({ n: 1 });
    });
  });

  describe('a try sent again after a lost reply', () => {
    it('gets its first answer and writes nothing', async () => {
      const scripts = scriptsOn(redis, ns);
      const dedupeKey = keys.dedupe('dd.echo', key('resend'));
      const args = (id: string, nonce: string, n: number) => [
        keys.base,
        id,
        'dd.echo',
        JSON.stringify({ n }),
        '011',
        30_000,
        nonce,
        'debounce',
        'k',
        60_000,
        '1',
        '',
        'delay',
        60_000,
      ];
      const call = (id: string, nonce: string, n: number) =>
        scripts.run<unknown[]>('enqueue-dedupe', [keys.run(id), dedupeKey], args(id, nonce, n));
      const id = key('resend-run');
      expect(await call(id, 'nonce-a', 1)).toEqual(['created', id, 'delayed', 1]);
      expect(await call(id, 'nonce-a', 1)).toEqual(['created', id, 'delayed', 1]);
      expect(await call(key('x'), 'nonce-b', 2)).toEqual(['replaced', id, 'delayed', 2]);
      expect(await call(key('x'), 'nonce-b', 2)).toEqual(['replaced', id, 'delayed', 2]);
      expect(await redis.hmget(keys.run(id), 'dedupeCount', 'dedupeInput', 'input')).toEqual(['2', '2', JSON.stringify({ n: 2 })]);
      await producer.client.cancel(id);
    });
  });

  describe('declared on @Workflow', () => {
    it('dedupes enqueues by class with the key made from the input; the enqueue option wins; by name uses only what it passes', async () => {
      const user = key('u');
      const first = await producer.client.enqueue(Declared, { user, n: 1 });
      expect(first.dedupe).toEqual({ outcome: 'created', key: user, mode: 'throttle', seq: 1 });
      const again = await producer.client.enqueue(Declared, { user, n: 2 });
      expect(again).toMatchObject({ id: first.id, dedupe: { outcome: 'deduplicated' } });
      const off = await producer.client.enqueue(Declared, { user, n: 3 }, { dedupe: false });
      expect(off.dedupe).toBeUndefined();
      expect(off.id).not.toBe(first.id);
      const byName = await producer.client.enqueue('dd.declared', { user, n: 4 });
      expect(byName.dedupe).toBeUndefined();
      const own = await producer.client.enqueue(
        Declared,
        { user, n: 5 },
        { dedupe: { key: `own:${user}`, ttlMs: 1_000, mode: 'throttle' } },
      );
      expect(own.dedupe).toMatchObject({ outcome: 'created', key: `own:${user}` });
      await Promise.all([first, off, byName, own].map((h) => h.result({ timeoutMs: 10_000 })));
    });

    it('enqueueMany refuses a dedupe, and the declared one unless an item turns it off', async () => {
      await expect(
        producer.client.enqueueMany(Echo, [{ input: { n: 1 }, opts: { dedupe: { key: 'k', ttlMs: 10, mode: 'throttle' } } }]),
      ).rejects.toThrow(/^items\[0\]\.opts\.dedupe: is not taken by enqueueMany/);
      await expect(producer.client.enqueueMany(Declared, [{ input: { user: 'x', n: 1 } }])).rejects.toThrow(
        /^items\[0\]\.opts\.dedupe: @Workflow\('dd\.declared'\) declares a dedupe/,
      );
      const handles = await producer.client.enqueueMany(Declared, [{ input: { user: 'x', n: 1 }, opts: { dedupe: false } }]);
      expect(handles).toHaveLength(1);
      await handles[0].result({ timeoutMs: 10_000 });
    });
  });

  describe('bad options', () => {
    const bad: Array<[string, () => Promise<unknown>, typeof InvalidOptionError, RegExp]> = [
      [
        'debounce with delayMs',
        () => producer.client.enqueue(Echo, { n: 1 }, { delayMs: 5, dedupe: { key: 'k', ttlMs: 10, mode: 'debounce' } }),
        InvalidOptionError,
        /^opts\.delayMs: cannot be set with dedupe mode 'debounce'/,
      ],
      [
        'debounce with runAt',
        () => producer.client.enqueue(Echo, { n: 1 }, { runAt: new Date(), dedupe: { key: 'k', ttlMs: 10, mode: 'debounce' } }),
        InvalidOptionError,
        /^opts\.runAt: cannot be set/,
      ],
      [
        'throttle with replace',
        () => producer.client.enqueue(Echo, { n: 1 }, { dedupe: { key: 'k', ttlMs: 10, mode: 'throttle', replace: true } }),
        InvalidOptionError,
        /^opts\.dedupe\.replace: applies to mode 'debounce' only/,
      ],
      [
        'throttle with maxWaitMs',
        () => producer.client.enqueue(Echo, { n: 1 }, { dedupe: { key: 'k', ttlMs: 10, mode: 'throttle', maxWaitMs: 20 } }),
        InvalidOptionError,
        /^opts\.dedupe\.maxWaitMs: applies to mode 'debounce' only/,
      ],
      [
        'maxWaitMs below ttlMs',
        () => producer.client.enqueue(Echo, { n: 1 }, { dedupe: { key: 'k', ttlMs: 100, mode: 'debounce', maxWaitMs: 50 } }),
        InvalidOptionError,
        /^opts\.dedupe\.maxWaitMs: must be at least ttlMs \(100\), got 50/,
      ],
      [
        'an unknown mode',
        () => producer.client.enqueue(Echo, { n: 1 }, { dedupe: { key: 'k', ttlMs: 10, mode: 'simple' as never } }),
        InvalidOptionError,
        /^opts\.dedupe\.mode: must be 'throttle' or 'debounce', got "simple"/,
      ],
      [
        'no ttlMs',
        () => producer.client.run(Echo, { n: 1 }, { dedupe: { key: 'k', mode: 'throttle' } as never }),
        InvalidOptionError,
        /^opts\.dedupe\.ttlMs: /,
      ],
      [
        'a key that would break the layout',
        () => producer.client.enqueue(Echo, { n: 1 }, { dedupe: { key: 'a b', ttlMs: 10, mode: 'throttle' } }),
        InvalidNameError,
        /^opts\.dedupe\.key: "a b" may only contain/,
      ],
      [
        'a misspelt key',
        () => producer.client.enqueue(Echo, { n: 1 }, { dedupe: { key: 'k', ttl: 10, mode: 'throttle' } as never }),
        InvalidOptionError,
        /^opts\.dedupe\.ttl: is not an option here; did you mean `ttlMs`\?/,
      ],
      [
        'a declared key function returning no key',
        () => producer.client.enqueue(Declared, { user: '', n: 1 }),
        InvalidNameError,
        /^@Workflow\('dd\.declared'\) dedupe\.key\(input\): must not be empty/,
      ],
    ];

    it.each(bad)('%s: a typed error, nothing sent to Redis', async (_, call, type, message) => {
      const monitor = await monitorCommands(ns);
      try {
        const error = await call().then(
          () => new Error('did not throw'),
          (e: unknown) => e as Error,
        );
        expect(error).toBeInstanceOf(type);
        expect(error.message).toMatch(message);
        // In the namespace's slot: on a cluster, served by the node the monitor watches.
        const sentinel = `${keys.base}sentinel-${key('s')}`;
        await redis.exists(sentinel);
        const seen: string[][] = [];
        for (
          let args = await monitor.next(() => true);
          !(args[0] === 'exists' && args[1] === sentinel);
          args = await monitor.next(() => true)
        )
          seen.push(args);
        // This namespace's only: on a server shared with other specs (the TLS suite), theirs show too.
        const ours = seen.filter((args) => args.some((arg) => arg.includes(keys.base)));
        expect(ours.filter((args) => args.some((arg) => arg.includes('dedupe') || arg.includes('enqueue')))).toEqual([]);
      } finally {
        await monitor.close();
      }
    });

    it('@Workflow refuses a bad dedupe at declaration', () => {
      expect(() => Workflow('dd.bad', { dedupe: { key: 'k' as never, ttlMs: 10, mode: 'throttle' } })).toThrow(
        /^@Workflow\('dd\.bad'\) dedupe\.key: must be a function/,
      );
      expect(() => Workflow('dd.bad', { dedupe: { key: () => 'k', ttlMs: 0, mode: 'throttle' } })).toThrow(InvalidOptionError);
    });
  });

  describe('listRuns', () => {
    it('filters by dedupe key', async () => {
      const dedupe: DedupeOptions = { key: key('list'), ttlMs: 60_000, mode: 'debounce' };
      const handle = await producer.client.enqueue(Echo, { n: 1 }, { dedupe });
      await producer.client.enqueue(Echo, { n: 2 }, { dedupe: { ...dedupe, key: key('list-other') } });
      const page = await producer.client.listRuns({ workflow: Echo, state: 'delayed', dedupeKey: dedupe.key });
      expect(page.runs.map((r) => r.id)).toEqual([handle.id]);
      expect(page.runs[0].dedupe).toEqual({ key: dedupe.key, mode: 'debounce', count: 1, inputSeq: 1 });
    });
  });

  it('starts each deduped window once: no run of a key was executed twice', () => {
    for (const [, inputs] of executions) expect(inputs).toHaveLength(1);
    expect(executions.size).toBeGreaterThan(5);
  });
});
