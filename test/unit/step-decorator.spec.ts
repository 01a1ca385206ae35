import 'reflect-metadata';
import { InvalidNameError, Stored, Step, Workflow } from '../../lib';
import { WorkflowMetadataAccessor } from '../../lib/discovery/workflow-metadata.accessor';
import { runScope, StepRunner } from '../../lib/workflow/run.scope';
import type { StepFn } from '../../lib/workflow/step.options';

class Pricing {
  calls = 0;
  constructor(private readonly rate: number) {}

  @Step() async price(amount: number, currency: string) {
    this.calls++;
    return { total: amount * this.rate, currency };
  }

  @Step({ name: 'tax.v2' }) tax(amount: number) {
    this.calls++;
    return amount * 0.2;
  }
}

@Workflow('unit.step-wf')
class StepWorkflow {
  async run() {
    return this.one();
  }
  @Step() async one() {
    return 1;
  }
  @Step({ name: 'two' }) async second() {
    return 2;
  }
}

describe('@Step', () => {
  it('outside a run, simply runs the method with its this and arguments and returns its value', async () => {
    const pricing = new Pricing(3);
    await expect(pricing.price(10, 'EUR')).resolves.toEqual({ total: 30, currency: 'EUR' });
    await expect(pricing.price(10, 'EUR')).resolves.toEqual({ total: 30, currency: 'EUR' });
    expect(pricing.calls).toBe(2); // not memoized outside a run
  });

  it('outside a run, a synchronous method stays synchronous', () => {
    const pricing = new Pricing(1);
    expect(pricing.tax(50)).toBe(10);
    expect(pricing.calls).toBe(1);
  });

  it('outside a run, errors propagate unchanged', async () => {
    class Failing {
      @Step() async boom(): Promise<never> {
        throw new RangeError('nope');
      }
    }
    await expect(new Failing().boom()).rejects.toThrow(RangeError);
  });

  it('keeps the method name', () => {
    expect(Pricing.prototype.price.name).toBe('price');
  });

  it('inside a run, goes through the run under its step name', async () => {
    const seen: string[] = [];
    const runner: StepRunner = {
      async step<T>(name: string, fn: StepFn<T>): Promise<Stored<T>> {
        seen.push(name);
        return (await fn({ signal: new AbortController().signal, attempt: 1 })) as Stored<T>;
      },
    };
    const pricing = new Pricing(2);
    // eslint-disable-next-line @typescript-eslint/await-thenable -- inside a run even the synchronous tax() goes through the runner and returns a promise: that is what this test checks
    const result = await runScope.run(runner, async () => [await pricing.price(5, 'USD'), await pricing.tax(10)]);
    expect(result).toEqual([{ total: 10, currency: 'USD' }, 2]);
    expect(seen).toEqual(['price', 'tax.v2']);
  });

  it('inside a run, the runner decides whether the method executes (memo replay)', async () => {
    const runner: StepRunner = { step: async <T>() => 'memoized' as unknown as T };
    const pricing = new Pricing(2);
    await expect(runScope.run(runner, () => pricing.price(5, 'USD'))).resolves.toBe('memoized');
    expect(pricing.calls).toBe(0);
  });

  it('records its step names for discovery', () => {
    expect(new WorkflowMetadataAccessor().getSteps(StepWorkflow)).toEqual(['one', 'two']);
    expect(new WorkflowMetadataAccessor().getWorkflow(StepWorkflow)).toMatchObject({ name: 'unit.step-wf' });
  });

  it('rejects an invalid step name at declaration', () => {
    const declare = () => {
      class Bad {
        @Step({ name: 'has space' }) async x() {
          return 1;
        }
      }
      return Bad;
    };
    expect(declare).toThrow(InvalidNameError);
  });
});
