import 'reflect-metadata';
import { Step, Workflow } from '../../lib';
import { runScope } from '../../lib/workflow/run.scope';
import { createApp, type TestApp, uniqueNamespace } from '../support/app';

/** What the stepped workflow calls: set once a class with a `@Step` method has been defined. */
interface Charger {
  charge(amount: number): Promise<number>;
  calls: number;
}
let charger: Charger | undefined;

@Workflow('scope.plain')
class PlainWorkflow {
  async run(input: { n: number }): Promise<number> {
    return input.n * 2;
  }
}

@Workflow('scope.stepped', { attempts: 2, backoff: { delayMs: 0 } })
class SteppedWorkflow {
  async run(input: { amount: number }, ctx: { attempt: number }): Promise<number> {
    const charged = await charger!.charge(input.amount);
    if (ctx.attempt === 1) throw new Error('first attempt fails after the step');
    return charged;
  }
}

/** Defines a class with a `@Step` method now, as a module loaded late would. */
function defineStepClass(): Charger {
  class Payments {
    calls = 0;
    @Step()
    async charge(amount: number): Promise<number> {
      this.calls += 1;
      return amount + 1;
    }
  }
  return new Payments();
}

/**
 * The run scope (an AsyncLocalStorage, whose first `run` turns on Node's promise hooks for the
 * whole process) is entered only once some `@Step` method exists in the process. This file
 * defines none at load (Jest gives each file its own modules), so it sees both sides.
 */
describe('the run scope', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await createApp([PlainWorkflow, SteppedWorkflow], { namespace: uniqueNamespace('scope') });
  });
  afterAll(() => app?.close());

  it('is not entered while no @Step method is defined; once one is, its calls are memoized again', async () => {
    const entered = jest.spyOn(runScope, 'run');
    try {
      expect(await app.client.run(PlainWorkflow, { n: 21 })).toBe(42);
      expect(entered).not.toHaveBeenCalled();

      charger = defineStepClass();
      // First attempt: the step runs, then the run fails; the retry replays the step from the memo.
      expect(await app.client.run(SteppedWorkflow, { amount: 9 }, { timeoutMs: 10_000 })).toBe(10);
      expect(charger.calls).toBe(1);
      expect(entered).toHaveBeenCalledTimes(2);
    } finally {
      entered.mockRestore();
    }
  });
});
