import type Redis from 'ioredis';
import { InvalidOptionError, RunContext, RunEvents, RunFailedEvent, TimeoutError, Workflow, WorkflowFailedError } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { parseReserveReply } from '../../lib/redis/commands/reserve.command';
import { newCallId } from '../../lib/redis/commands/call-id';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { enqueueArgs, enqueueKeys, enqueueReply, fakePark } from '../support/queue-state';
import { scriptsOn } from '../support/scripts';
import { deferred, Deferred, Gates, namespaceKeys } from '../support/workflows';

/** Gates the workflows wait on (the test opens them), and events they signal (the test awaits them). */
const gates = new Gates();
const happened = new Gates();
const log: string[] = [];
/** What `ctx.signal` aborted with, by `runId:attempt`. */
const aborts = new Map<string, unknown>();
/** What the abandoned attempt's step write came to, by run id. */
const lateWrites = new Map<string, Deferred<unknown>>();
const lateWrite = (runId: string) => lateWrites.get(runId) ?? (lateWrites.set(runId, deferred<unknown>()), lateWrites.get(runId)!);

function note(ctx: RunContext, what: string): void {
  const entry = `${ctx.runId}:${what}`;
  log.push(entry);
  happened.open(entry);
}

/** Capped at one run at a time fleet-wide; its first attempt can ignore its signal for as long as the test keeps its gate shut. */
@Workflow('timeouts.ignoring', { timeoutMs: 1_000, attempts: 2, backoff: { delayMs: 0 }, concurrency: 1 })
class IgnoringWorkflow {
  async run(input: { hang: boolean }, ctx: RunContext): Promise<string> {
    note(ctx, `start:${ctx.attempt}`);
    const attempt = ctx.attempt;
    ctx.signal.addEventListener('abort', () => aborts.set(`${ctx.runId}:${attempt}`, ctx.signal.reason));
    await ctx.step('first', () => note(ctx, `first:${attempt}`));
    if (input.hang && attempt === 1) {
      await gates.get(ctx.runId).promise; // ignores ctx.signal
      note(ctx, 'stale-resumed');
      lateWrite(ctx.runId).resolve(
        await ctx
          .step('late', () => 'from the stale attempt')
          .then(
            () => 'written',
            (error: unknown) => error,
          ),
      );
      return 'stale-result';
    }
    return `result@${attempt}`;
  }
}

/** A generous limit of its own; runs wait on their gate. */
@Workflow('timeouts.long-limit', { timeoutMs: 60_000, attempts: 1 })
class LongLimitWorkflow {
  async run(_input: unknown, ctx: RunContext): Promise<string> {
    note(ctx, 'start');
    await gates.get(ctx.runId).promise;
    return 'done';
  }
}

/** A short limit of its own; the run takes longer (real work, here a timer). */
@Workflow('timeouts.short-limit', { timeoutMs: 100, attempts: 1 })
class ShortLimitWorkflow {
  async run(input: { workMs: number }): Promise<string> {
    await new Promise((resolve) => setTimeout(resolve, input.workMs));
    return 'finished';
  }
}

describe('run time limits', () => {
  let t: TestApp;
  let redis: Redis;
  let namespace: string;
  const failures: RunFailedEvent[] = [];

  beforeAll(async () => {
    namespace = uniqueNamespace('timeouts');
    t = await createApp([IgnoringWorkflow, LongLimitWorkflow, ShortLimitWorkflow], { namespace, worker: { concurrency: 4 } });
    t.app.get(RunEvents).on('failed', (event) => failures.push(event));
    redis = rawRedis();
  });
  afterAll(async () => {
    gates.openAll(); // let abandoned code finish before the app closes
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('fails an attempt that ignores its signal at the limit, frees its cap slot at once, and refuses its late writes', async () => {
    const x = await t.client.enqueue(IgnoringWorkflow, { hang: true }, { id: 'ignore-x' });
    await happened.get('ignore-x:first:1').promise;
    // Capped at 1: this run can start only once the hanging attempt's slot is free.
    const y = await t.client.run(IgnoringWorkflow, { hang: false }, { id: 'ignore-y', timeoutMs: 10_000 });
    expect(y).toBe('result@1');
    // …and both it and the retry of the hanging run completed while that attempt's code still runs.
    expect(await x.result({ timeoutMs: 10_000 })).toBe('result@2');
    expect(log).not.toContain('ignore-x:stale-resumed');
    expect(log.indexOf('ignore-y:start:1')).toBeGreaterThan(log.indexOf('ignore-x:start:1'));

    const reason = aborts.get('ignore-x:1');
    expect(reason).toBeInstanceOf(TimeoutError);
    expect(reason).toMatchObject({ runId: 'ignore-x', limitMs: 1_000, step: undefined });
    expect(aborts.has('ignore-x:2')).toBe(false);
    expect(failures.filter((f) => f.runId === 'ignore-x')).toEqual([
      expect.objectContaining({
        attempt: 1,
        willRetry: true,
        error: { name: 'TimeoutError', message: 'Run ignore-x timed out after 1000 ms' },
      }),
    ]);
    // The step before the hang ran once; the retry replayed it.
    expect(log.filter((entry) => entry.startsWith('ignore-x:first'))).toEqual(['ignore-x:first:1']);
    expect(await t.client.get('ignore-x')).toMatchObject({ state: 'completed', attempts: 2, failures: 1 });

    // The abandoned code resumes: the step it calls next does not start (it rejects with the
    // attempt's TimeoutError, so no side effect is repeated), and its result goes nowhere.
    gates.open('ignore-x');
    expect(await lateWrite('ignore-x').promise).toBeInstanceOf(TimeoutError);
    const fields = await redis.hgetall(`{sluice:${namespace}}:run:ignore-x`);
    expect(Object.keys(fields).filter((field) => field.startsWith('step:') && !field.startsWith('step:@'))).toEqual(['step:first#1']);
    expect(JSON.parse(fields.result)).toBe('result@2');
  });

  it('fails the run for good with TimeoutError when no attempt is left', async () => {
    const error = await t.client
      .run(LongLimitWorkflow, {}, { id: 'long-override', runTimeoutMs: 150, timeoutMs: 10_000 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    expect(error).toMatchObject({ causeName: 'TimeoutError', causeMessage: 'Run long-override timed out after 150 ms' });
  });

  it("uses the enqueue's runTimeoutMs over the workflow's, either way, and stores it only when set", async () => {
    // Workflow limit 100 ms, run's own 60 s: 300 ms of work completes.
    await expect(
      t.client.run(ShortLimitWorkflow, { workMs: 300 }, { id: 'short-override', runTimeoutMs: 60_000, timeoutMs: 10_000 }),
    ).resolves.toBe('finished');
    expect(await redis.hget(`{sluice:${namespace}}:run:short-override`, 'timeoutMs')).toBe('60000');
    // Without one, the workflow's limit applies, and nothing is stored.
    const error = await t.client
      .run(ShortLimitWorkflow, { workMs: 300 }, { id: 'short-default', timeoutMs: 10_000 })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ causeName: 'TimeoutError', causeMessage: 'Run short-default timed out after 100 ms' });
    expect(await redis.hget(`{sluice:${namespace}}:run:short-default`, 'timeoutMs')).toBeNull();
  });
});

describe('runTimeoutMs: bad input', () => {
  let t: TestApp;
  let redis: Redis;
  let namespace: string;
  let bootKeys: string[];

  beforeAll(async () => {
    namespace = uniqueNamespace('timeouts-bad');
    // Producer only, so nothing but the calls under test could write to this namespace.
    t = await createApp([ShortLimitWorkflow], { namespace, worker: { enabled: false } });
    redis = rawRedis();
    bootKeys = await namespaceKeys(redis, namespace); // what the boot wrote (the layout marker)
  });
  afterAll(async () => {
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it.each([0, -1, 1.5, 2_147_483_648, NaN, '500', null])(
    'rejects runTimeoutMs %p in enqueue, enqueueMany and run with InvalidOptionError, writing nothing',
    async (runTimeoutMs) => {
      const opts = { runTimeoutMs: runTimeoutMs as number };
      for (const call of [
        () => t.client.enqueue(ShortLimitWorkflow, { workMs: 1 }, opts),
        () => t.client.enqueueMany(ShortLimitWorkflow, [{ input: { workMs: 1 } }, { input: { workMs: 1 }, opts }]),
        () => t.client.run(ShortLimitWorkflow, { workMs: 1 }, opts),
      ]) {
        const error = await call().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(InvalidOptionError);
        expect((error as InvalidOptionError).message).toMatch(/opts\.runTimeoutMs: must be an integer from 1 to 2147483647/);
      }
      expect(await namespaceKeys(redis, namespace)).toEqual(bootKeys);
    },
  );
});

describe('the run time limit in claims (Lua)', () => {
  const WF = 'timeouts.raw';
  let redis: Redis;
  let keys: RedisKeys;
  let namespace: string;
  const reserve = (flags: number, callId = newCallId()) =>
    scriptsOn(redis).run<unknown[]>(
      'reserve',
      [keys.stallGate, keys.call(callId)],
      [keys.base, 10, 30_000, 0, 3, 256, 60_000, 'w', flags, 0, WF],
    );
  /** The limit as the 'timeout' option, as the client sends it for a run with runTimeoutMs. */
  const enqueue = async (id: string, limit?: number) =>
    enqueueReply(
      await scriptsOn(redis).run<string>(
        'enqueue',
        enqueueKeys(keys, id),
        enqueueArgs(keys, WF, id, { id }, true, 30_000, false, { nonce: `nonce-${id}`, timeoutMs: limit }),
      ),
    );

  beforeAll(() => {
    redis = rawRedis();
  });
  beforeEach(() => {
    namespace = uniqueNamespace('timeouts-raw');
    keys = new RedisKeys('sluice', namespace);
  });
  afterEach(() => dropNamespace(redis, namespace));
  afterAll(() => redis.quit());

  it('never fast-paths a run with its own limit, and ships the limit with each claim, its replay, and with the extras', async () => {
    await fakePark(redis, keys, WF);
    expect(await enqueue('limited', 250)).toEqual([1, 'waiting']);
    expect(await redis.hget(keys.run('limited'), 'timeoutMs')).toBe('250');
    const callId = newCallId();
    const reply = await reserve(0, callId);
    // Flat after the head: id, workflow, token, attempt, failures, input, limit, group, memo length.
    expect(reply.slice(7, 10)).toEqual(['250', '', 0]);
    expect(parseReserveReply(reply).claims[0]).toMatchObject({ id: 'limited', timeoutMs: 250 });
    // The retry of that call (its reply lost) hands the same claim back, with its limit.
    const replayed = await reserve(1, callId);
    expect(parseReserveReply(replayed).claims[0]).toMatchObject({ id: 'limited', timeoutMs: 250 });

    // With the telemetry extras: the limit, group and memo, then trace and wait.
    expect(await enqueue('limited-2', 400)).toEqual([1, 'waiting']);
    const withExtras = await reserve(2);
    expect(withExtras.slice(7, 11)).toEqual(['400', '', 0, '']);
    expect(withExtras).toHaveLength(12);
    const [claim] = parseReserveReply(withExtras, true).claims;
    expect(claim).toMatchObject({ id: 'limited-2', timeoutMs: 400 });
    expect(claim.trace).toBeUndefined();
  });

  it('a run without a limit keeps the fast path and has none in its claim', async () => {
    await fakePark(redis, keys, WF);
    expect(await enqueue('plain')).toEqual([1, 'active']);
    expect(await redis.hexists(keys.run('plain'), 'timeoutMs')).toBe(0);
    const reply = await reserve(0);
    expect(reply.slice(7)).toEqual(['', '', 0]);
    expect(parseReserveReply(reply).claims[0].timeoutMs).toBeUndefined();
  });
});
