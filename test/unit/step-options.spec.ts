import 'reflect-metadata';
import {
  InvalidOptionError,
  LeaseLostError,
  NonRetryableError,
  RunContext,
  Step,
  StepCallOptions,
  TimeoutError,
  Workflow,
} from '../../lib';
import { SluiceTesting } from '../../lib/testing';
import { LazyAbort } from '../../lib/execution/lazy.abort';
import { AttemptGuard } from '../../lib/execution/attempt.guard';
import { StepRecorder } from '../../lib/execution/step.recorder';
import { DEFAULT_STEP_BACKOFF, resolveStepOptions } from '../../lib/workflow/step.options';

const MAX = 2_147_483_647;

describe('step and time limit options: bad input', () => {
  const badStepOptions: Array<[string, unknown, string]> = [
    ['timeoutMs 0', { timeoutMs: 0 }, 'timeoutMs'],
    ['timeoutMs fractional', { timeoutMs: 1.5 }, 'timeoutMs'],
    ['timeoutMs past a timer', { timeoutMs: MAX + 1 }, 'timeoutMs'],
    ['timeoutMs as a string', { timeoutMs: '100' }, 'timeoutMs'],
    ['attempts 0', { attempts: 0 }, 'attempts'],
    ['attempts NaN', { attempts: NaN }, 'attempts'],
    ['attempts over 1000', { attempts: 1001 }, 'attempts'],
    ['backoff not an object', { attempts: 2, backoff: 5 }, 'backoff'],
    ['backoff.delayMs negative', { attempts: 2, backoff: { delayMs: -1 } }, 'backoff.delayMs'],
    ['backoff.delayMs missing', { attempts: 2, backoff: {} }, 'backoff.delayMs'],
    ['backoff.maxDelayMs past a timer', { attempts: 2, backoff: { delayMs: 1, maxDelayMs: MAX + 1 } }, 'backoff.maxDelayMs'],
    ['backoff.factor 0', { attempts: 2, backoff: { delayMs: 1, factor: 0 } }, 'backoff.factor'],
    ['backoff.factor Infinity', { attempts: 2, backoff: { delayMs: 1, factor: Infinity } }, 'backoff.factor'],
    ['options not an object', 'fast', ''],
  ];

  it.each(badStepOptions)('@Step rejects %s at decoration with InvalidOptionError', (_label, options, field) => {
    let error: unknown;
    try {
      class Bad {
        @Step(options as StepCallOptions) async work(): Promise<void> {}
      }
      void Bad;
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as InvalidOptionError).field).toBe(`@Step work${field ? `.${field}` : ''}`);
  });

  it.each(badStepOptions)('ctx.step rejects %s before calling fn or writing anything', async (_label, options, field) => {
    const writes: string[] = [];
    const recorder = new StepRecorder('run-1', new Map(), async (key) => (writes.push(key), true), 1024);
    let called = false;
    const error = await recorder.step('charge', () => (called = true), options as StepCallOptions).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as InvalidOptionError).field).toBe(`ctx.step("charge") options${field ? `.${field}` : ''}`);
    expect({ called, writes }).toEqual({ called: false, writes: [] });
  });

  it.each([0, -5, 1.5, MAX + 1, '300', null])('@Workflow rejects timeoutMs %p with InvalidOptionError', (timeoutMs) => {
    expect(() => Workflow('opts.bad-timeout', { timeoutMs: timeoutMs as number })(class {})).toThrow(InvalidOptionError);
  });

  it('accepts the bounds, and fills the defaults', () => {
    expect(resolveStepOptions(undefined, 'x')).toBeUndefined();
    expect(resolveStepOptions({}, 'x')).toBeUndefined();
    expect(resolveStepOptions({ timeoutMs: 1 }, 'x')).toEqual({ timeoutMs: 1, attempts: 1, backoff: DEFAULT_STEP_BACKOFF });
    expect(resolveStepOptions({ timeoutMs: MAX, attempts: 1000, backoff: { delayMs: 0 } }, 'x')).toEqual({
      timeoutMs: MAX,
      attempts: 1000,
      backoff: { delayMs: 0, factor: 2, maxDelayMs: 30_000 },
    });
    expect(resolveStepOptions({ attempts: 2, backoff: { delayMs: 60_000 } }, 'x')?.backoff).toEqual({
      delayMs: 60_000,
      factor: 2,
      maxDelayMs: 60_000,
    });
    expect(() => Workflow('opts.ok-timeout', { timeoutMs: MAX })(class {})).not.toThrow();
  });

  it('the harness checks runTimeoutMs and failStep onTry as enqueue does', async () => {
    @Workflow('opts.harness')
    class Echo {
      async run(input: unknown): Promise<unknown> {
        return input;
      }
    }
    const harness = SluiceTesting.harness(new Echo());
    for (const runTimeoutMs of [0, 1.5, MAX + 1]) {
      await expect(harness.run(1, { runTimeoutMs })).rejects.toMatchObject({ name: 'InvalidOptionError', field: 'opts.runTimeoutMs' });
    }
    expect(() => harness.failStep('x', { onTry: 0 })).toThrow(InvalidOptionError);
    expect(() => harness.failStep('x', { onTry: [1, 2.5] })).toThrow(InvalidOptionError);
  });
});

describe('step tries (the recorder, no Redis)', () => {
  function recorderWith(guard: AttemptGuard) {
    const saved = new Map<string, string>();
    const recorder = new StepRecorder(
      'run-1',
      new Map(),
      async (key, encoded) => (saved.set(key, encoded), true),
      1024,
      undefined,
      undefined,
      guard,
    );
    return { recorder, saved };
  }

  it('waits the backoff between tries (delayMs × factor^(n−1), from the guard), and passes each try its number', async () => {
    const waits: number[] = [];
    const guard = new AttemptGuard(
      'run-1',
      new LazyAbort(),
      async (ms) => void waits.push(ms),
      () => 0.5,
    );
    const { recorder, saved } = recorderWith(guard);
    const tries: number[] = [];
    const value = await recorder.step(
      'flaky',
      ({ attempt }) => {
        tries.push(attempt);
        if (attempt < 4) throw new Error(`try ${attempt}`);
        return attempt;
      },
      { attempts: 4, backoff: { delayMs: 100, factor: 3, maxDelayMs: 500 } },
    );
    expect(value).toBe(4);
    expect(tries).toEqual([1, 2, 3, 4]);
    expect(waits).toEqual([100, 300, 500]);
    expect([...saved.keys()]).toEqual(['flaky#1']);
  });

  it.each([
    ['NonRetryableError', () => new NonRetryableError('no')],
    ['InvalidOptionError', () => new InvalidOptionError('f', 'bad')],
    ['LeaseLostError', () => new LeaseLostError('run-1')],
  ])('does not retry a %s', async (_name, make) => {
    const guard = new AttemptGuard('run-1', new LazyAbort(), async () => undefined);
    const { recorder } = recorderWith(guard);
    let calls = 0;
    const thrown = make();
    await expect(
      recorder.step(
        's',
        () => {
          calls++;
          throw thrown;
        },
        { attempts: 5 },
      ),
    ).rejects.toBe(thrown);
    expect(calls).toBe(1);
  });

  it('does not retry once the run signal has aborted', async () => {
    const abort = new LazyAbort();
    const guard = new AttemptGuard('run-1', abort, async () => undefined);
    const { recorder } = recorderWith(guard);
    let calls = 0;
    await expect(
      recorder.step(
        's',
        () => {
          calls++;
          abort.abort(new Error('lease lost'));
          throw new Error('failed');
        },
        { attempts: 5 },
      ),
    ).rejects.toThrow('failed');
    expect(calls).toBe(1);
  });

  it("links the step's signal to the run's, and a nested step gets its parent's context and ignores its own options", async () => {
    const abort = new LazyAbort();
    const { recorder } = recorderWith(new AttemptGuard('run-1', abort));
    const seen: unknown[] = [];
    await recorder.step(
      'outer',
      async (outer) => {
        await recorder.step(
          'inner',
          (inner) => {
            seen.push(inner === outer, inner.attempt);
            return 1;
          },
          { timeoutMs: 1, attempts: 3 },
        );
        const signal = outer.signal;
        abort.abort(new Error('run aborted'));
        seen.push(signal.aborted, (signal.reason as Error).message);
      },
      { attempts: 2 },
    );
    expect(seen).toEqual([true, 1, true, 'run aborted']);
  });

  it('a step without options gets the run signal and try 1', async () => {
    const abort = new LazyAbort();
    const { recorder } = recorderWith(new AttemptGuard('run-1', abort));
    const contexts = await recorder.step('plain', (step) => [step.signal === abort.signal, step.attempt]);
    expect(contexts).toEqual([true, 1]);
  });

  it("a step's final timeout ends the attempt through the guard, even when the caller catches it", async () => {
    const abort = new LazyAbort();
    const guard = new AttemptGuard('run-1', abort);
    const { recorder } = recorderWith(guard);
    const body = (async () => {
      const caught = await recorder.step('hang', () => new Promise(() => undefined), { timeoutMs: 20 }).catch((e: unknown) => e);
      return caught;
    })();
    const settled = await guard.settle(body).catch((e: unknown) => e);
    expect(settled).toBeInstanceOf(TimeoutError);
    expect(settled).toMatchObject({ runId: 'run-1', limitMs: 20, step: 'hang#1' });
    expect(abort.reason).toBe(settled);
    await expect(body).resolves.toBe(settled); // the body went on, having caught it
  });

  it('the guard fails at the run limit without waiting for the body, and sets no timer without one', async () => {
    const guard = new AttemptGuard('run-2', new LazyAbort());
    await expect(guard.settle(new Promise(() => undefined), 20)).rejects.toMatchObject({
      name: 'TimeoutError',
      runId: 'run-2',
      limitMs: 20,
    });
    const spy = jest.spyOn(global, 'setTimeout');
    try {
      await expect(new AttemptGuard('run-3', new LazyAbort()).settle(Promise.resolve(7))).resolves.toBe(7);
      expect(spy).not.toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  });
});

describe('the harness: step options, step signals and time limits', () => {
  @Workflow('opts.harness-steps', { attempts: 2, backoff: { delayMs: 1_000 } })
  class HarnessSteps {
    calls = { first: 0, flaky: 0 };
    async run(input: { failTries: number; hang?: boolean }, ctx: RunContext): Promise<string> {
      await ctx.step('first', () => ++this.calls.first);
      if (input.hang && ctx.attempt === 1) await new Promise(() => undefined); // ignores its signal
      return ctx.step(
        'flaky',
        ({ attempt }) => {
          this.calls.flaky++;
          if (attempt <= input.failTries) throw new Error(`try ${attempt}`);
          return `ok on ${attempt}`;
        },
        { attempts: 3, backoff: { delayMs: 100 } },
      );
    }
  }

  it('retries steps in place, reporting the tries and the waits on the fake clock', async () => {
    const workflow = new HarnessSteps();
    const harness = SluiceTesting.harness(workflow, { now: 0 });
    const run = await harness.run({ failTries: 2 });
    expect(run.result).toBe('ok on 3');
    expect(run.attempts).toHaveLength(1);
    expect(run.attempts[0].stepRetryDelaysMs).toEqual([100, 200]);
    expect(run.attempts[0].steps.map((s) => [s.key, s.outcome, s.tries])).toEqual([
      ['first#1', 'executed', undefined],
      ['flaky#1', 'executed', 3],
    ]);
    expect(run.finishedAt.getTime()).toBe(300);
    expect(workflow.calls).toEqual({ first: 1, flaky: 3 });
  });

  it('failStep onTry fails only those tries', async () => {
    const harness = SluiceTesting.harness(new HarnessSteps(), { now: 0 }).failStep('flaky', { onTry: [1, 2] });
    const run = await harness.run({ failTries: 0 });
    expect(run.result).toBe('ok on 3');
  });

  it('a run time limit (runTimeoutMs over none) fails the attempt at once with TimeoutError; the retry completes', async () => {
    const harness = SluiceTesting.harness(new HarnessSteps(), { now: 0 });
    const run = await harness.run({ failTries: 0, hang: true }, { id: 'h-1', runTimeoutMs: 30 });
    expect(run.attempts.map((a) => a.outcome)).toEqual(['retry', 'completed']);
    expect(run.attempts[0].error).toMatchObject({ name: 'TimeoutError', runId: 'h-1', limitMs: 30 });
    expect(run.attempts[1].replayed).toEqual(['first#1']);
    expect(run.result).toBe('ok on 1');
  });
});
