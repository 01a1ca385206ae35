import type Redis from 'ioredis';
import {
  InvalidNameError,
  InvalidOptionError,
  MAX_MAILBOX,
  NonRetryableError,
  PayloadNotSerializableError,
  PayloadTooLargeError,
  RunContext,
  RunNotFoundError,
  RunStateError,
  SignalMailboxFullError,
  Workflow,
} from '../../lib';
import { RedisConnections } from '../../lib/redis/redis.connections';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter, Gates, pollUntil } from '../support/workflows';
import type { ErrorClass } from '../support/error-class';

/**
 * Signals (QueueClient.signal, ctx.waitForSignal) against the real Redis: delivered to a waiting
 * run, kept in the run's mailbox before the wait (oldest first per name, at most 100) and after a
 * timeout, refused for finished and unknown runs, and bad input refused before any Redis call.
 */
const holds = new Gates();
const reached = new Gates();
const effects = new Counter();

interface SignalWait {
  name: string;
  timeoutMs?: number;
  /** A gate the run waits on (not memoized: open on replay) right before this wait. */
  hold?: string;
}

@Workflow('ws.inbox', { attempts: 1 })
class Inbox {
  async run(input: { waits: SignalWait[]; hold?: string }, ctx: RunContext) {
    await ctx.step('start', () => effects.inc(`start:${ctx.runId}`));
    if (input.hold) await holds.get(input.hold).promise;
    const seen: unknown[] = [];
    for (const wait of input.waits) {
      if (wait.hold) await holds.get(wait.hold).promise;
      const outcome = await ctx.waitForSignal(wait.name, wait.timeoutMs === undefined ? undefined : { timeoutMs: wait.timeoutMs });
      seen.push(
        outcome.timedOut
          ? { timedOut: true }
          : { timedOut: false, payload: outcome.payload === undefined ? '<undefined>' : outcome.payload },
      );
      reached.open(`${ctx.runId}:${seen.length}`);
    }
    return seen;
  }
}

@Workflow('ws.broken', { attempts: 1 })
class Broken {
  async run() {
    throw new NonRetryableError('broken on purpose');
  }
}

describe('durable waits: signals', () => {
  const ns = uniqueNamespace('wsig');
  const base = `{sluice:${ns}}:`;
  const mailbox = (id: string) => `${base}mailbox:${id}`;
  let redis: Redis;
  let worker: TestApp;
  let producer: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Inbox, Broken], { namespace: ns, worker: { concurrency: 8 } });
    producer = await createApp([], { namespace: ns, worker: { enabled: false }, maxPayloadBytes: 1024 });
  });
  afterAll(async () => {
    holds.openAll();
    await worker.close();
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const inState = (id: string, state: string) =>
    pollUntil(
      () => producer.client.get(id),
      (run) => run?.state === state,
      `${id} ${state}`,
    );

  it('a signal during the wait resumes the run with its payload (undefined payloads too)', async () => {
    const run = await producer.client.enqueue('ws.inbox', { waits: [{ name: 'go' }, { name: 'go' }] });
    await inState(run.id, 'waiting-signal');
    expect(await producer.client.signal(run.id, 'go', { ok: 1 })).toEqual({ delivered: true });
    await reached.get(`${run.id}:1`).promise;
    await inState(run.id, 'waiting-signal');
    expect(await producer.client.signal(run.id, 'go')).toEqual({ delivered: true });
    expect(await run.result({ timeoutMs: 10_000 })).toEqual([
      { timedOut: false, payload: { ok: 1 } },
      { timedOut: false, payload: '<undefined>' },
    ]);
    expect(effects.get(`start:${run.id}`)).toBe(1);
    // Two suspends, so three claims.
    expect((await producer.client.get(run.id))?.attempts).toBe(3);
  });

  it('a signal of another name goes to the mailbox and leaves the run waiting', async () => {
    const run = await producer.client.enqueue('ws.inbox', { waits: [{ name: 'go' }, { name: 'other' }] });
    await inState(run.id, 'waiting-signal');
    expect(await producer.client.signal(run.id, 'other', 'kept')).toEqual({ delivered: false });
    expect(await redis.llen(mailbox(run.id))).toBe(1);
    expect((await producer.client.get(run.id))?.state).toBe('waiting-signal');
    expect(await producer.client.signal(run.id, 'go', 'now')).toEqual({ delivered: true });
    // The second wait finds 'other' in the mailbox: taken at once.
    expect(await run.result({ timeoutMs: 10_000 })).toEqual([
      { timedOut: false, payload: 'now' },
      { timedOut: false, payload: 'kept' },
    ]);
    expect(await redis.exists(mailbox(run.id))).toBe(0);
  });

  it('signals sent before the wait are kept in the mailbox and taken oldest first per name, without suspending', async () => {
    const run = await producer.client.enqueue('ws.inbox', {
      hold: 'before',
      waits: [{ name: 'go' }, { name: 'go' }, { name: 'x' }, { name: 'go', timeoutMs: 0 }],
    });
    await inState(run.id, 'active');
    expect(await producer.client.signal(run.id, 'go', 'first')).toEqual({ delivered: false });
    expect(await producer.client.signal(run.id, 'x', 'ex')).toEqual({ delivered: false });
    expect(await producer.client.signal(run.id, 'go', 'second')).toEqual({ delivered: false });
    expect(await redis.llen(mailbox(run.id))).toBe(3);
    holds.open('before');
    expect(await run.result({ timeoutMs: 10_000 })).toEqual([
      { timedOut: false, payload: 'first' },
      { timedOut: false, payload: 'second' },
      { timedOut: false, payload: 'ex' },
      // The mailbox is empty by now: a timeout of 0 ends at once.
      { timedOut: true },
    ]);
    // Every wait ended at once: the run never gave up its lease.
    expect((await producer.client.get(run.id))?.attempts).toBe(1);
    expect(await redis.exists(mailbox(run.id))).toBe(0);
  });

  it('a signal to a run not started yet (delayed) waits in its mailbox', async () => {
    const run = await producer.client.enqueue('ws.inbox', { waits: [{ name: 'go' }] }, { delayMs: 300 });
    expect((await producer.client.get(run.id))?.state).toBe('delayed');
    expect(await producer.client.signal(run.id, 'go', 'early')).toEqual({ delivered: false });
    expect(await run.result({ timeoutMs: 10_000 })).toEqual([{ timedOut: false, payload: 'early' }]);
    expect((await producer.client.get(run.id))?.attempts).toBe(1);
  });

  it('after a timeout a signal goes to the mailbox (the next wait of that name takes it); once finished: RunStateError', async () => {
    const run = await producer.client.enqueue('ws.inbox', {
      waits: [
        { name: 'go', timeoutMs: 150 },
        { name: 'go', hold: 'late' },
      ],
    });
    await reached.get(`${run.id}:1`).promise;
    expect((await producer.client.get(run.id))?.state).toBe('active');
    expect(await producer.client.signal(run.id, 'go', 'late')).toEqual({ delivered: false });
    expect(await redis.llen(mailbox(run.id))).toBe(1);
    holds.open('late');
    expect(await run.result({ timeoutMs: 10_000 })).toEqual([{ timedOut: true }, { timedOut: false, payload: 'late' }]);
    expect(await redis.exists(mailbox(run.id))).toBe(0);
    const error = await producer.client.signal(run.id, 'go', 'too late').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RunStateError);
    expect(error).toMatchObject({ runId: run.id, state: 'completed' });
    expect(await redis.exists(mailbox(run.id))).toBe(0);
  });

  it('a wait whose signal never comes resolves { timedOut: true } (a result, not an error)', async () => {
    const run = await producer.client.enqueue('ws.inbox', { waits: [{ name: 'go', timeoutMs: 100 }] });
    expect(await run.result({ timeoutMs: 10_000 })).toEqual([{ timedOut: true }]);
    await expect(producer.client.signal(run.id, 'go', 1)).rejects.toBeInstanceOf(RunStateError);
  });

  it('finished (failed, cancelled) and unknown runs', async () => {
    const cancelled = await producer.client.enqueue('ws.inbox', { waits: [{ name: 'go' }] }, { delayMs: '1h' });
    expect(await producer.client.signal(cancelled.id, 'go', 1)).toEqual({ delivered: false });
    expect(await redis.llen(mailbox(cancelled.id))).toBe(1);
    await producer.client.cancel(cancelled.id);
    // A cancel finishes the run: its mailbox goes with it.
    expect(await redis.exists(mailbox(cancelled.id))).toBe(0);
    const error = await producer.client.signal(cancelled.id, 'go', 2).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RunStateError);
    expect(error).toMatchObject({ state: 'cancelled' });
    const broken = await producer.client.enqueue('ws.broken', {});
    await expect(broken.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ causeName: 'NonRetryableError' });
    await expect(producer.client.signal(broken.id, 'go', 3)).rejects.toMatchObject({ name: 'RunStateError', state: 'failed' });
    expect(await redis.exists(mailbox(broken.id))).toBe(0);
    const missing = await producer.client.signal('wsig-nobody', 'go', 1).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(RunNotFoundError);
    expect(missing).toMatchObject({ runId: 'wsig-nobody' });
    expect(await redis.exists(mailbox('wsig-nobody'))).toBe(0);
  });

  it(`the mailbox holds ${MAX_MAILBOX}: the next signal is refused with SignalMailboxFullError and not stored`, async () => {
    const run = await producer.client.enqueue('ws.inbox', { waits: [{ name: 'go' }] }, { delayMs: '1h' });
    for (let i = 0; i < MAX_MAILBOX; i++) expect(await producer.client.signal(run.id, i % 2 ? 'a' : 'b', i)).toEqual({ delivered: false });
    expect(await redis.llen(mailbox(run.id))).toBe(MAX_MAILBOX);
    const error = await producer.client.signal(run.id, 'a', 'one too many').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SignalMailboxFullError);
    expect(error).toMatchObject({ runId: run.id, limit: MAX_MAILBOX });
    expect(await redis.llen(mailbox(run.id))).toBe(MAX_MAILBOX);
    expect(await redis.lindex(mailbox(run.id), -1)).toBe(`a ${JSON.stringify({ p: MAX_MAILBOX - 1 })}`);
    await producer.client.cancel(run.id);
    expect(await redis.exists(mailbox(run.id))).toBe(0);
  });

  it('a full mailbox does not stop a signal the run is waiting for: it is delivered, not stored', async () => {
    const run = await producer.client.enqueue('ws.inbox', { hold: 'full', waits: [{ name: 'go' }] });
    await inState(run.id, 'active');
    for (let i = 0; i < MAX_MAILBOX; i++) await producer.client.signal(run.id, 'noise', i);
    await expect(producer.client.signal(run.id, 'go', 'queued?')).rejects.toBeInstanceOf(SignalMailboxFullError);
    holds.open('full');
    await inState(run.id, 'waiting-signal');
    expect(await producer.client.signal(run.id, 'go', 'through')).toEqual({ delivered: true });
    expect(await run.result({ timeoutMs: 10_000 })).toEqual([{ timedOut: false, payload: 'through' }]);
    expect(await redis.exists(mailbox(run.id))).toBe(0);
  });

  it('bad input: typed errors before any Redis call', async () => {
    const command = producer.app.get(RedisConnections).command;
    const spy = jest.spyOn(command.client, 'sendCommand');
    const { client } = producer;
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const cases: Array<[string, () => Promise<unknown>, ErrorClass, string | RegExp]> = [
      ['an empty run id', () => client.signal('', 'go', 1), InvalidNameError, 'runId'],
      ['a run id with a space', () => client.signal('a b', 'go', 1), InvalidNameError, 'runId'],
      ['a run id with braces', () => client.signal('{x}', 'go', 1), InvalidNameError, 'runId'],
      ['a numeric run id', () => client.signal(42 as unknown as string, 'go', 1), InvalidNameError, 'runId'],
      ['an overlong run id', () => client.signal('r'.repeat(201), 'go', 1), InvalidNameError, 'runId'],
      ['an empty signal name', () => client.signal('r1', '', 1), InvalidNameError, 'signal name'],
      ['a signal name with a space', () => client.signal('r1', 'go now', 1), InvalidNameError, 'signal name'],
      ['a signal name with a bar', () => client.signal('r1', 'a|b', 1), InvalidNameError, 'signal name'],
      ['no signal name', () => client.signal('r1', undefined as unknown as string, 1), InvalidNameError, 'signal name'],
      ['an overlong signal name', () => client.signal('r1', 's'.repeat(201), 1), InvalidNameError, 'signal name'],
      ['a function payload', () => client.signal('r1', 'go', { f: () => 1 }), PayloadNotSerializableError, /^signal payload/],
      ['a symbol payload', () => client.signal('r1', 'go', Symbol('s')), PayloadNotSerializableError, /^signal payload/],
      ['a circular payload', () => client.signal('r1', 'go', circular), PayloadNotSerializableError, /^signal payload/],
      ['an Error payload', () => client.signal('r1', 'go', { e: new Error('x') }), PayloadNotSerializableError, /^signal payload/],
      ['a WeakMap payload', () => client.signal('r1', 'go', new WeakMap()), PayloadNotSerializableError, /^signal payload/],
      ['a payload over maxPayloadBytes', () => client.signal('r1', 'go', 'x'.repeat(2000)), PayloadTooLargeError, 'signal payload'],
      ['sendEvent: an empty name', () => client.sendEvent(''), InvalidNameError, 'event name'],
      ['sendEvent: a name with a space', () => client.sendEvent('a b'), InvalidNameError, 'event name'],
      ['sendEvent: a name with a bar', () => client.sendEvent('a|b'), InvalidNameError, 'event name'],
      ['sendEvent: a key with a bar', () => client.sendEvent('paid', { key: 'a|b' }), InvalidNameError, 'opts.key'],
      ['sendEvent: a numeric key', () => client.sendEvent('paid', { key: 7 as unknown as string }), InvalidNameError, 'opts.key'],
      ['sendEvent: null options', () => client.sendEvent('paid', null as never), InvalidOptionError, 'opts'],
      ['sendEvent: numeric options', () => client.sendEvent('paid', 5 as never), InvalidOptionError, 'opts'],
      [
        'sendEvent: a function payload',
        () => client.sendEvent('paid', { payload: () => 1 }),
        PayloadNotSerializableError,
        /^event payload/,
      ],
      [
        'sendEvent: a payload over maxPayloadBytes',
        () => client.sendEvent('paid', { payload: 'y'.repeat(2000) }),
        PayloadTooLargeError,
        'event payload',
      ],
    ];
    for (const [label, call, type, field] of cases) {
      let error: unknown;
      try {
        error = await call().then(
          () => new Error(`${label}: resolved`),
          (e: unknown) => e,
        );
      } catch (thrown) {
        error = new Error(`${label}: threw synchronously: ${String(thrown)}`);
      }
      expect({ label, error }).toEqual({ label, error: expect.any(type) });
      const actual = (error as { field?: string }).field;
      expect({ label, field: actual }).toEqual({ label, field: typeof field === 'string' ? field : expect.stringMatching(field) });
    }
    expect(spy).not.toHaveBeenCalled();
    // The spy does see a valid call.
    await expect(client.signal('wsig-nobody', 'go', 1)).rejects.toBeInstanceOf(RunNotFoundError);
    expect(spy).toHaveBeenCalled();
    spy.mockRestore();
  });

  it('the namespace is consistent at rest', async () => {
    await pollUntil(
      () => producer.client.stats({ workflow: 'ws.inbox' }),
      (s) => s.workflows['ws.inbox'].active === 0,
      'no run active',
    );
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });
});
