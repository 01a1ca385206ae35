import 'reflect-metadata';
import { InvalidInputError, PayloadNotSerializableError, RunContext, StepMemoLimitError, Workflow } from '../../lib';
import { SluiceTesting } from '../../lib/testing';

/**
 * `ctx.continueAsNew` and the memo budget of sleeps in the WorkflowHarness (no Redis), which must
 * behave as a worker does (see test/e2e/testing-parity.spec.ts for the side-by-side comparison).
 */
@Workflow('ch.counter', { attempts: 2 })
class Counter {
  async run(input: { i: number }, ctx: RunContext<{ i: number }>) {
    await ctx.step('tick', () => input.i);
    if (input.i < 4) return ctx.continueAsNew({ i: input.i + 1 });
    return { last: input.i, attempt: ctx.attempt };
  }
}

@Workflow('ch.misuse', { attempts: 3 })
class Misuse {
  async run(input: 'step' | 'function', ctx: RunContext<unknown>) {
    if (input === 'step') await ctx.step('inside', () => ctx.continueAsNew(1));
    else await ctx.continueAsNew({ f: () => 1 });
    return 'unreachable';
  }
}

@Workflow('ch.after', { attempts: 1 })
class After {
  readonly ran: string[] = [];
  async run(input: string, ctx: RunContext<string>) {
    if (input === 'first') {
      void ctx.continueAsNew('again');
      await ctx.step('late', () => this.ran.push('late'));
    }
    return this.ran;
  }
}

@Workflow('ch.sleeps', { attempts: 3 })
class Sleeps {
  async run(input: { n: number }, ctx: RunContext) {
    for (let i = 0; i < input.n; i++) await ctx.sleep('tick', 1);
    return input.n;
  }
}

describe('WorkflowHarness: ctx.continueAsNew and the memo budget of waits', () => {
  it('runs incarnation after incarnation with an empty memo each, and reports the last one', async () => {
    const run = await SluiceTesting.harness(new Counter()).run({ i: 0 });
    expect(run).toMatchObject({ state: 'completed', result: { last: 4, attempt: 1 }, continued: 4, failures: 0 });
    expect(run.memo).toEqual({ 'tick#1': 4 });
    expect(run.attempts).toHaveLength(1);
  });

  it('refuses it inside a step (InvalidInputError) and an input JSON cannot carry, failing the run without retry', async () => {
    const inside = await SluiceTesting.harness(new Misuse()).run('step');
    expect(inside).toMatchObject({ state: 'failed', continued: 0 });
    expect(inside.error).toBeInstanceOf(InvalidInputError);
    expect(inside.attempts).toHaveLength(1);
    const bad = await SluiceTesting.harness(new Misuse()).run('function');
    expect(bad).toMatchObject({ state: 'failed', continued: 0 });
    expect(bad.error).toBeInstanceOf(PayloadNotSerializableError);
  });

  it('runs no call made after it', async () => {
    const workflow = new After();
    const run = await SluiceTesting.harness(workflow).run('first');
    expect(run).toMatchObject({ state: 'completed', result: [], continued: 1 });
  });

  it('counts sleeps against maxRunMemoBytes: the sleep that would go over fails the run without retry', async () => {
    const run = await SluiceTesting.harness(new Sleeps(), { maxRunMemoBytes: 1024 }).run({ n: 300 });
    expect(run.state).toBe('failed');
    expect(run.error).toBeInstanceOf(StepMemoLimitError);
    expect(run.attempts).toHaveLength(1);
  });
});
