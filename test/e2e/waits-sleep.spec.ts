import type Redis from 'ioredis';
import { RunContext, RunEvents, RunOutcomeEvent, Workflow } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter } from '../support/workflows';

/**
 * Durable sleeps: a past date or a zero duration returns at once (no suspend, one claim); a
 * sleep is no failure and does not use up `attempts`; each resume is a new claim, so
 * `ctx.attempt` (and `RunInfo.attempts`) grows by one per sleep — observed: 1, 2, 3, 4 for three
 * sleeps with failures 0. Side-by-side waits run one after the other; bad arguments are typed
 * errors raised before the call is numbered.
 */
const effects = new Counter();
const attemptsSeen = new Map<string, number[]>();
const stamps = new Map<string, number>();

@Workflow('wsl.thrice', { attempts: 1 })
class Thrice {
  async run(input: { ms: number }, ctx: RunContext) {
    attemptsSeen.set(ctx.runId, [...(attemptsSeen.get(ctx.runId) ?? []), ctx.attempt]);
    await ctx.step('one', () => effects.inc(`one:${ctx.runId}`));
    await ctx.sleep('a', input.ms);
    await ctx.sleep('b', input.ms);
    await ctx.step('two', () => effects.inc(`two:${ctx.runId}`));
    await ctx.sleep('c', input.ms);
    return ctx.attempt;
  }
}

@Workflow('wsl.instant', { attempts: 1 })
class Instant {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.sleepUntil('past', new Date(Date.now() - 60_000));
    await ctx.sleepUntil('epoch', new Date(0));
    await ctx.sleep('zero', 0);
    await ctx.sleep('zero-text', '0ms');
    return ctx.attempt;
  }
}

/** A sleep, then a step that fails once: the failure counts, the sleep does not. */
@Workflow('wsl.mixed', { attempts: 2, backoff: { delayMs: 10 } })
class Mixed {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.sleep('nap', 50);
    await ctx.step('flaky', () => {
      if (effects.inc(`flaky:${ctx.runId}`) === 1) throw new Error('flaky once');
    });
    return ctx.attempt;
  }
}

/** The attempt's time limit stops counting while the run sleeps. */
@Workflow('wsl.limited', { attempts: 1, timeoutMs: 300 })
class Limited {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.sleep('longer-than-the-limit', 600);
    return 'in time';
  }
}

@Workflow('wsl.side-by-side', { attempts: 1 })
class SideBySide {
  async run(input: { ms: number }, ctx: RunContext) {
    const started = Date.now();
    await Promise.all([
      ctx.sleep('a', input.ms),
      ctx.sleep('b', input.ms),
      ctx.step('x', () => {
        effects.inc(`x:${ctx.runId}`);
        stamps.set(ctx.runId, Date.now());
      }),
    ]);
    return { attempt: ctx.attempt, started };
  }
}

/** Bad arguments to the waits: typed errors, caught here; none takes a position. */
@Workflow('wsl.bad-args', { attempts: 1 })
class BadArgs {
  async run(_input: unknown, ctx: RunContext) {
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['empty sleep name', () => ctx.sleep('', 10)],
      ['sleep name with a space', () => ctx.sleep('a b', 10)],
      ['negative duration', () => ctx.sleep('n', -1)],
      ['NaN duration', () => ctx.sleep('n', NaN)],
      ['unparseable duration', () => ctx.sleep('n', 'soon')],
      ['not a date', () => ctx.sleepUntil('d', '2030-01-01' as never)],
      ['invalid date', () => ctx.sleepUntil('d', new Date('nope'))],
      ['signal timeout -1', () => ctx.waitForSignal('go', { timeoutMs: -1 })],
      ['signal options not an object', () => ctx.waitForSignal('go', 5 as never)],
      ['signal name with braces', () => ctx.waitForSignal('{go}')],
      ['event key with a space', () => ctx.waitForEvent('paid', { key: 'a b' })],
      ['event name with a bar', () => ctx.waitForEvent('pa|id')],
      ['invokeAll of nothing', () => ctx.invokeAll([])],
      ['invoke with an enqueue-only option', () => ctx.invoke('wsl.instant', {}, { delay: 5 } as never)],
      ['invoke with an unserializable input', () => ctx.invoke('wsl.instant', { f: () => 1 })],
    ];
    const errors: Record<string, string> = {};
    for (const [label, call] of calls) {
      errors[label] = await call().then(
        () => 'resolved',
        (error: Error) => `${error.name}: ${(error as { field?: string }).field ?? ''}`,
      );
    }
    await ctx.step('first-real-call', () => 1);
    // A wait writes the position entries of the calls before it.
    await ctx.sleep('then', 1);
    return errors;
  }
}

describe('durable waits: sleep', () => {
  const ns = uniqueNamespace('wsl');
  let redis: Redis;
  let worker: TestApp;
  let producer: TestApp;
  const suspended: RunOutcomeEvent[] = [];

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Thrice, Instant, Mixed, Limited, SideBySide, BadArgs], { namespace: ns, worker: { concurrency: 4 } });
    worker.app.get(RunEvents).on('suspended', (event) => suspended.push(event));
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
  });
  afterAll(async () => {
    await worker.close();
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const suspendsOf = (id: string) => suspended.filter((e) => e.runId === id).map((e) => e.attempt);

  it('sleepUntil a past date and sleep(0) return at once: no suspend, one claim', async () => {
    const run = await producer.client.enqueue('wsl.instant', {});
    expect(await run.result({ timeoutMs: 10_000 })).toBe(1);
    expect(await producer.client.get(run.id)).toMatchObject({ state: 'completed', attempts: 1, failures: 0 });
    expect(suspendsOf(run.id)).toEqual([]);
    // Each was still recorded (a replay returns it from the memo).
    const memo = await redis.hmget(`{sluice:${ns}}:run:${run.id}`, 'step:past#1', 'step:epoch#1', 'step:zero#1', 'step:@0', 'step:@3');
    expect(memo).toEqual(['{"t":1}', '{"t":1}', '{"t":1}', 'sleep:past#1', 'sleep:zero-text#1']);
  });

  it('three sleeps with attempts: 1 complete; each resume is a claim (ctx.attempt 1..4), no failure', async () => {
    // Enqueued where the workflow is declared, so the run gets its attempts: 1 (a producer that
    // does not declare it would give it defaults.attempts).
    const run = await worker.client.enqueue('wsl.thrice', { ms: 40 });
    expect(await run.result({ timeoutMs: 10_000 })).toBe(4);
    expect(attemptsSeen.get(run.id)).toEqual([1, 2, 3, 4]);
    expect(suspendsOf(run.id)).toEqual([1, 2, 3]);
    expect(await producer.client.get(run.id)).toMatchObject({ state: 'completed', attempts: 4, failures: 0, maxAttempts: 1 });
    expect(effects.get(`one:${run.id}`)).toBe(1);
    expect(effects.get(`two:${run.id}`)).toBe(1);
  });

  it('failures are counted apart from sleeps: attempts: 2 allows one failure after a sleep', async () => {
    const run = await worker.client.enqueue('wsl.mixed', {});
    // Claims: 1 sleeps; 2 fails in the step; 3 completes.
    expect(await run.result({ timeoutMs: 10_000 })).toBe(3);
    expect(await producer.client.get(run.id)).toMatchObject({ state: 'completed', attempts: 3, failures: 1, maxAttempts: 2 });
    expect(effects.get(`flaky:${run.id}`)).toBe(2);
  });

  it("the attempt's time limit does not run while the run sleeps", async () => {
    const run = await producer.client.enqueue('wsl.limited', {});
    expect(await run.result({ timeoutMs: 10_000 })).toBe('in time');
    expect(await producer.client.get(run.id)).toMatchObject({ attempts: 2, failures: 0 });
  });

  it('waits started side by side run one after the other; a step started beside them runs once, after them', async () => {
    const ms = 120;
    const run = await producer.client.enqueue(SideBySide, { ms });
    const before = Date.now();
    const { attempt } = await run.result({ timeoutMs: 10_000 });
    expect(Date.now() - before).toBeGreaterThanOrEqual(2 * ms - 20);
    expect(attempt).toBe(3);
    expect(effects.get(`x:${run.id}`)).toBe(1);
    expect(stamps.get(run.id)! - before).toBeGreaterThanOrEqual(2 * ms - 20);
    const positions = await redis.hmget(`{sluice:${ns}}:run:${run.id}`, 'step:@0', 'step:@1', 'step:@2');
    expect(positions).toEqual(['sleep:a#1', 'sleep:b#1', 'step:x#1']);
  });

  it('bad arguments are typed errors thrown before the call takes a position', async () => {
    const run = await producer.client.enqueue('wsl.bad-args', {});
    const errors = await run.result({ timeoutMs: 10_000 });
    expect(errors).toEqual({
      'empty sleep name': 'InvalidNameError: ctx.sleep name',
      'sleep name with a space': 'InvalidNameError: ctx.sleep name',
      'negative duration': expect.stringMatching(/^InvalidOptionError: ctx\.sleep\("n"\) duration/),
      'NaN duration': expect.stringMatching(/^InvalidOptionError: ctx\.sleep\("n"\) duration/),
      'unparseable duration': expect.stringMatching(/^InvalidOptionError: ctx\.sleep\("n"\) duration/),
      'not a date': 'InvalidOptionError: ctx.sleepUntil("d") until',
      'invalid date': 'InvalidOptionError: ctx.sleepUntil("d") until',
      'signal timeout -1': expect.stringMatching(/^InvalidOptionError: ctx\.waitForSignal\("go"\) timeout/),
      'signal options not an object': 'InvalidOptionError: ctx.waitForSignal("go") options',
      'signal name with braces': 'InvalidNameError: ctx.waitForSignal name',
      'event key with a space': 'InvalidNameError: ctx.waitForEvent("paid") key',
      'event name with a bar': 'InvalidNameError: ctx.waitForEvent name',
      'invokeAll of nothing': 'InvalidInputError: ctx.invokeAll calls',
      'invoke with an enqueue-only option': 'InvalidOptionError: ctx.invoke opts.delay',
      'invoke with an unserializable input': expect.stringMatching(/^PayloadNotSerializableError: /),
    });
    // None of them was numbered: the first real call is position 0, and no child was started.
    const fields = await redis.hgetall(`{sluice:${ns}}:run:${run.id}`);
    expect(
      Object.keys(fields)
        .filter((f) => f.startsWith('step:'))
        .sort(),
    ).toEqual(['step:@0', 'step:@1', 'step:first-real-call#1', 'step:then#1']);
    expect([fields['step:@0'], fields['step:@1']]).toEqual(['step:first-real-call#1', 'sleep:then#1']);
    expect(await producer.client.stats({ workflow: 'wsl.instant' }).then((s) => s.workflows['wsl.instant'].waiting)).toBe(0);
  });

  it('the namespace is consistent at rest', async () => {
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });
});
