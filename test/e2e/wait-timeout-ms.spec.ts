import type Redis from 'ioredis';
import { InvalidOptionError, RunContext, WaitOutcome, Workflow, WorkflowFailedError } from '../../lib';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';

/**
 * Issue 30: `ctx.waitForSignal('x', { timeoutMs: 300 })`, the key every other API uses for a
 * duration, was accepted and ignored (wait options took `timeout`): the wait never ended. Now
 * `timeoutMs` is the name, and the old `timeout` still works, with one deprecation warning per
 * process. Its own file: the warning is once per process, and no other test here may use it first.
 */
@Workflow('wt.wait', { attempts: 1 })
class WaitWorkflow {
  async run(input: { kind: 'signal' | 'event'; opts: Record<string, unknown> }, ctx: RunContext): Promise<WaitOutcome<unknown>> {
    return input.kind === 'signal' ? ctx.waitForSignal('never', input.opts) : ctx.waitForEvent('never', input.opts);
  }
}

describe('a wait with timeoutMs', () => {
  let t: TestApp;
  let namespace: string;
  let redis: Redis;
  let emitWarning: jest.SpyInstance;

  beforeAll(async () => {
    namespace = uniqueNamespace('wt');
    t = await createApp([WaitWorkflow], { namespace });
    redis = rawRedis();
    emitWarning = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
  });
  afterAll(async () => {
    emitWarning.mockRestore();
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  const deprecations = () => emitWarning.mock.calls.filter(([, options]) => (options as { code?: string })?.code === 'SLUICE_DEP_TIMEOUT');

  it.each([
    ['waitForSignal', 'signal'],
    ['waitForEvent', 'event'],
  ] as const)('times out: ctx.%s resolves { timedOut: true } after timeoutMs', async (_call, kind) => {
    const started = Date.now();
    const outcome = await t.client.run(WaitWorkflow, { kind, opts: { timeoutMs: 300 } }, { timeoutMs: 10_000 });
    expect(outcome).toEqual({ timedOut: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(deprecations()).toHaveLength(0);
  });

  it('still takes the deprecated timeout, warning once per process however many runs use it', async () => {
    const outcomes = await Promise.all([
      t.client.run(WaitWorkflow, { kind: 'signal', opts: { timeout: 300 } }, { timeoutMs: 10_000 }),
      t.client.run(WaitWorkflow, { kind: 'event', opts: { timeout: '300ms' } }, { timeoutMs: 10_000 }),
      t.client.run(WaitWorkflow, { kind: 'signal', opts: { timeout: 300 } }, { timeoutMs: 10_000 }),
    ]);
    expect(outcomes).toEqual([{ timedOut: true }, { timedOut: true }, { timedOut: true }]);
    expect(deprecations()).toHaveLength(1);
    expect(deprecations()[0]).toEqual([
      expect.stringMatching(/`timeout` \(ctx\.waitFor(Signal|Event) opts\) is deprecated; name it `timeoutMs`/),
      { type: 'DeprecationWarning', code: 'SLUICE_DEP_TIMEOUT' },
    ]);
  });

  it.each([
    ['a misspelt key', { timout: 300 }, /ctx\.waitForSignal opts\.timout: is not an option here; did you mean `timeoutMs`\?/],
    [
      'both names',
      { timeout: 300, timeoutMs: 300 },
      /ctx\.waitForSignal opts\.timeout: is the old name of `timeoutMs`, which is given too/,
    ],
  ])('fails the run at once, without a retry, for %s', async (_label, opts, message) => {
    const error = await t.client.run(WaitWorkflow, { kind: 'signal', opts }, { timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    const failure = error as WorkflowFailedError;
    expect(failure.message).toMatch(message);
    expect(failure.message).toMatch(new RegExp(InvalidOptionError.name));
  });
});
