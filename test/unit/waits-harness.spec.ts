import 'reflect-metadata';
import { NonDeterminismError, RunContext, SluiceError, Workflow } from '../../lib';
import { SluiceTesting } from '../../lib/testing';
import { AttemptGuard } from '../../lib/execution/attempt.guard';
import { LazyAbort } from '../../lib/execution/lazy.abort';

/**
 * Durable waits in the WorkflowHarness (no Redis): a sleep advances the fake clock and carries on
 * within the attempt; signals, events and children are refused with a clear error. Plus the
 * attempt guard's handling of an attempt that ends before its body is settled.
 */
const START = new Date('2026-05-01T00:00:00.000Z');
const HOUR = 3_600_000;

@Workflow('wh.sleeper', { attempts: 1 })
class Sleeper {
  async run(input: { ms?: number; until?: string }, ctx: RunContext) {
    if (input.ms !== undefined) await ctx.sleep('nap', input.ms);
    if (input.until !== undefined) await ctx.sleepUntil('until', new Date(input.until));
    return ctx.attempt;
  }
}

@Workflow('wh.stepper', { attempts: 1 })
class Stepper {
  async run(_input: unknown, ctx: RunContext) {
    const before = await ctx.step('before', () => 'b');
    await ctx.sleep('nap', '2h');
    const after = await ctx.step('after', () => 'a');
    return { before, after };
  }
}

@Workflow('wh.waiter', { attempts: 1 })
class Waiter {
  async run(input: { kind: 'signal' | 'event' | 'invoke' | 'invokeAll' }, ctx: RunContext) {
    switch (input.kind) {
      case 'signal':
        return ctx.waitForSignal('go');
      case 'event':
        return ctx.waitForEvent('paid', { key: 'o1' });
      case 'invoke':
        return ctx.invoke('wh.sleeper', {});
      case 'invokeAll':
        return ctx.invokeAll([{ workflow: 'wh.sleeper', input: {} }]);
    }
  }
}

/**
 * Attempt 1 calls step 'a', sleeps and fails; attempt 2 calls 'b' before the recorded sleep: the
 * code "changed" between attempts. (Past the last recorded wait nothing is checked, so the sleep
 * is what makes the change detectable.)
 */
@Workflow('wh.drifting', { attempts: 3, backoff: { delayMs: 10 } })
class Drifting {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.step(ctx.attempt === 1 ? 'a' : 'b', () => ctx.attempt);
    await ctx.sleep('nap', 10);
    if (ctx.attempt === 1) throw new Error('first attempt fails');
    return 'unreachable';
  }
}

/** The same change with no wait recorded: not checked (a retry may take another branch). */
@Workflow('wh.branching', { attempts: 3, backoff: { delayMs: 10 } })
class Branching {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.step(ctx.attempt === 1 ? 'a' : 'b', () => ctx.attempt);
    if (ctx.attempt === 1) throw new Error('first attempt fails');
    return 'completed on another branch';
  }
}

describe('WorkflowHarness: durable waits', () => {
  it('ctx.sleep advances the fake clock by its duration, within one attempt', async () => {
    const harness = SluiceTesting.harness(new Sleeper(), { now: START });
    const run = await harness.run({ ms: 2 * HOUR });
    expect(run.state).toBe('completed');
    expect(run.result).toBe(1);
    expect(run.attempts).toHaveLength(1);
    expect(harness.clock.now()).toBe(START.getTime() + 2 * HOUR);
    expect(run.finishedAt.getTime()).toBe(START.getTime() + 2 * HOUR);
  });

  it('ctx.sleepUntil moves the clock to a future date and leaves it for a past one', async () => {
    const harness = SluiceTesting.harness(new Sleeper(), { now: START });
    const at = new Date(START.getTime() + 5 * HOUR);
    await harness.run({ until: at.toISOString() });
    expect(harness.clock.date()).toEqual(at);
    await harness.run({ until: START.toISOString() });
    expect(harness.clock.date()).toEqual(at);
  });

  it('steps around a sleep: executed once each, the memo reported decoded (position entries are not step results)', async () => {
    const harness = SluiceTesting.harness(new Stepper(), { now: START });
    // Regression: WorkflowHarness.finish (lib/testing/workflow.harness.ts) decoded every memo
    // entry as JSON, including the position entries '@<p>' = 'step:before#1' the recorder writes:
    // the run rejected with "SyntaxError: Unexpected token 's', "step:before#1" is not valid JSON"
    // (as did every harness run that executes a step: test/unit/testing-harness.spec.ts).
    const run = await harness.run({});
    expect(run.state).toBe('completed');
    expect(run.result).toEqual({ before: 'b', after: 'a' });
    expect(run.attempts[0]).toMatchObject({ executed: ['before#1', 'after#1'], replayed: [] });
    expect(harness.clock.now()).toBe(START.getTime() + 2 * HOUR);
    expect(run.memo).toMatchObject({ 'before#1': 'b', 'after#1': 'a' });
    expect(Object.keys(run.memo).filter((key) => key.startsWith('@'))).toEqual([]);
  });

  it.each([
    ['signal', 'waitForSignal'],
    ['event', 'waitForEvent'],
    ['invoke', 'invoke'],
    ['invokeAll', 'invoke'],
  ] as const)('ctx.%s is refused with a clear error', async (kind, method) => {
    const harness = SluiceTesting.harness(new Waiter(), { now: START });
    const run = await harness.run({ kind });
    expect(run.state).toBe('failed');
    expect(run.error).toBeInstanceOf(SluiceError);
    expect((run.error as Error).message).toBe(`WorkflowHarness cannot run ctx.${method}: test it with SluiceTesting against Redis`);
    expect(harness.clock.now()).toBe(START.getTime());
  });

  it('a call that differs from the memo at its position fails the run for good with NonDeterminismError', async () => {
    const harness = SluiceTesting.harness(new Drifting(), { now: START });
    const run = await harness.run({});
    expect(run.state).toBe('failed');
    expect(run.error).toBeInstanceOf(NonDeterminismError);
    expect(run.error).toMatchObject({ position: 0, recorded: 'step:a#1', called: 'step:b#1' });
    expect(run.attempts.map((a) => a.outcome)).toEqual(['retry', 'failed']);
    expect(run.attempts[1].executed).toEqual([]);
  });

  it('a call that differs past the last recorded wait (here: no wait at all) is not checked', async () => {
    const run = await SluiceTesting.harness(new Branching(), { now: START }).run({});
    expect(run.state).toBe('completed');
    expect(run.result).toBe('completed on another branch');
    expect(run.attempts[1].executed).toEqual(['b#1']);
  });
});

describe('AttemptGuard: an attempt that ends before its body is settled', () => {
  // Regression: StepRecorder.place() calls guard.expire(NonDeterminismError) synchronously when the
  // mismatch is the run's first call, i.e. while RunExecutor is still evaluating the argument of
  // guard.settle(runScope.run(...)). settle() then saw `expired` and returned `reject(expired)`
  // without attaching a handler to `body`: the body's rejection was unhandled, which ends a Node
  // process run with the default --unhandled-rejections=throw (a worker crash, on every worker
  // that claims the run). settle() must observe `body` in that branch too.
  it('settle() still observes the body (its rejection must not go unhandled)', async () => {
    const guard = new AttemptGuard('r1', new LazyAbort());
    const error = new Error('expired before settle');
    guard.expire(error);
    const then = jest.fn();
    const body = { then } as unknown as PromiseLike<never>;
    await expect(guard.settle(body)).rejects.toBe(error);
    await new Promise((resolve) => setImmediate(resolve));
    expect(then).toHaveBeenCalled();
  });

  it('(control) a body that rejects after settle() is observed', async () => {
    const guard = new AttemptGuard('r2', new LazyAbort());
    const then = jest.fn();
    const settled = guard.settle({ then });
    guard.expire(new Error('expired after settle'));
    await expect(settled).rejects.toThrow('expired after settle');
    await new Promise((resolve) => setImmediate(resolve));
    expect(then).toHaveBeenCalled();
  });
});
