import 'reflect-metadata';
import { Step, Workflow } from '../../lib';
import { openRunScopes, runScope } from '../../lib/workflow/run.scope';
import { createApp, type TestApp, uniqueNamespace } from '../support/app';

/**
 * A process whose only `@Step` methods belong to `@Workflow` classes (Jest gives this file its
 * own modules): a run enters the run scope only if its own class declares steps, and the scope
 * closes once its code settles, so a plain run after it pays nothing (see needsRunScope).
 */
let stepCalls = 0;

@Workflow('own-scope.stepped', { attempts: 2, backoff: { delayMs: 0 } })
class SteppedWorkflow {
  async run(input: { n: number }, ctx: { attempt: number }): Promise<number> {
    const doubled = await this.double(input.n);
    if (ctx.attempt === 1) throw new Error('first attempt fails after the step');
    return doubled;
  }

  @Step()
  async double(n: number): Promise<number> {
    stepCalls += 1;
    return n * 2;
  }
}

/** Extends a stepped workflow: the steps it inherits are its own. */
@Workflow('own-scope.inherited', { attempts: 2, backoff: { delayMs: 0 } })
class InheritedWorkflow extends SteppedWorkflow {}

let borrowed: SteppedWorkflow | undefined;

@Workflow('own-scope.plain', { attempts: 2, backoff: { delayMs: 0 } })
class PlainWorkflow {
  async run(input: { n: number }, ctx: { attempt: number }): Promise<number> {
    // Another workflow's @Step method is no step of this run: it runs plainly, on every attempt.
    const doubled = borrowed ? await borrowed.double(input.n) : input.n * 2;
    if (borrowed && ctx.attempt === 1) throw new Error('first attempt fails after the call');
    return doubled;
  }
}

describe('the run scope, with steps only on workflow classes', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await createApp([SteppedWorkflow, InheritedWorkflow, PlainWorkflow], { namespace: uniqueNamespace('own-scope') });
  });
  afterAll(() => app?.close());
  beforeEach(() => {
    stepCalls = 0;
    borrowed = undefined;
  });

  it('is entered by the runs of a class with steps, which memoize, and closed once they settle', async () => {
    const entered = jest.spyOn(runScope, 'run');
    try {
      expect(await app.client.run(SteppedWorkflow, { n: 4 }, { timeoutMs: 10_000 })).toBe(8);
      expect(stepCalls).toBe(1); // the retry replayed the step from the memo
      expect(entered).toHaveBeenCalledTimes(2);
      expect(await app.client.run(InheritedWorkflow, { n: 5 }, { timeoutMs: 10_000 })).toBe(10);
      expect(stepCalls).toBe(2);
      expect(entered).toHaveBeenCalledTimes(4);
      expect(openRunScopes()).toBe(0);
    } finally {
      entered.mockRestore();
    }
  });

  it('is not entered by a run of a class without steps, even after stepped runs', async () => {
    await app.client.run(SteppedWorkflow, { n: 1 }, { timeoutMs: 10_000 });
    const entered = jest.spyOn(runScope, 'run');
    try {
      expect(await app.client.run(PlainWorkflow, { n: 21 }, { timeoutMs: 10_000 })).toBe(42);
      expect(entered).not.toHaveBeenCalled();
    } finally {
      entered.mockRestore();
    }
  });

  it("runs another workflow's @Step method plainly, on every attempt", async () => {
    borrowed = app.app.get(SteppedWorkflow);
    expect(await app.client.run(PlainWorkflow, { n: 3 }, { timeoutMs: 10_000 })).toBe(6);
    expect(stepCalls).toBe(2);
  });

  it('keeps memoizing while stepped and plain runs interleave (the scope opens and closes under them)', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        i % 2 === 0
          ? app.client.run(SteppedWorkflow, { n: i }, { timeoutMs: 20_000 })
          : app.client.run(PlainWorkflow, { n: i }, { timeoutMs: 20_000 }),
      ),
    );
    expect(results).toEqual(Array.from({ length: 40 }, (_, i) => i * 2));
    // Each stepped run's step executed once: its second attempt replayed it.
    expect(stepCalls).toBe(20);
  });
});
