import 'reflect-metadata';
import { z } from 'zod';
import { InputValidationError, OutputValidationError, Workflow } from '../../lib';
import { SluiceTesting } from '../../lib/testing';
import { ArkWorkflow, AsyncWorkflow, BadOutputWorkflow, ValibotWorkflow, ZodOrderWorkflow } from '../support/schema.workflows';

/** A declared schedule whose input the schema refuses: the harness's attempt refuses it as a worker's does. */
@Workflow('schema.harness-scheduled', {
  input: z.object({ n: z.number() }),
  attempts: 3,
  schedules: [{ cron: '@hourly', input: { n: 'x' as never } }],
})
class ScheduledWorkflow {
  calls = 0;
  async run(input: { n: number }): Promise<number> {
    this.calls++;
    return input.n;
  }
}

describe('WorkflowHarness validates with the workflow schemas as production does', () => {
  it('run gets the input schema output; the result is the output schema output', async () => {
    const harness = SluiceTesting.harness(new ZodOrderWorkflow());
    const run = await harness.run({ items: [{ sku: 'a', qty: 4 }], placedAt: '2025-06-01T00:00:00Z' } as never);
    expect(run).toMatchObject({ state: 'completed', result: { units: 4, note: 'none', year: 2025, label: '4 units' } });

    const valibot = await SluiceTesting.harness(new ValibotWorkflow()).run({ name: 'ada' } as never);
    expect(valibot.result).toEqual({ greeting: 'hi ada (0 tags)' });
    expect((await SluiceTesting.harness(new ArkWorkflow()).run({ id: 'x', count: 3 })).result).toEqual({ doubled: 6 });
    expect((await SluiceTesting.harness(new AsyncWorkflow()).run({ user: 'ada' })).result).toEqual({ ok: true });
  });

  it('a refused input throws InputValidationError before anything runs, listing every issue', async () => {
    const workflow = new ZodOrderWorkflow();
    const spy = jest.spyOn(workflow, 'run');
    const error = await SluiceTesting.harness(workflow)
      .run({ items: [{ sku: 1, qty: 0 }] } as never)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputValidationError);
    expect((error as InputValidationError).issues.map((issue) => issue.path)).toEqual([
      'input.items[0].sku',
      'input.items[0].qty',
      'input.placedAt',
    ]);
    expect(spy).not.toHaveBeenCalled();
    await expect(SluiceTesting.harness(new AsyncWorkflow()).run({ user: 'banned' })).rejects.toThrow(/input\.user: user is banned/);
  });

  it('a refused result fails the run at once (OutputValidationError), sync and async schemas alike', async () => {
    const run = await SluiceTesting.harness(new BadOutputWorkflow()).run(undefined);
    expect(run).toMatchObject({ state: 'failed', failures: 1, maxAttempts: 3 });
    expect(run.error).toBeInstanceOf(OutputValidationError);
    expect((run.error as OutputValidationError).issues).toEqual([{ path: 'output.total', message: expect.any(String) }]);
    expect(run.failure?.causeName).toBe('OutputValidationError');

    const async = await SluiceTesting.harness(new AsyncWorkflow()).run({ user: 'not-ok' });
    expect(async.state).toBe('failed');
    expect(async.error).toBeInstanceOf(OutputValidationError);
  });

  it('an input stored without validation (a declared schedule) fails the attempt without retries', async () => {
    const workflow = new ScheduledWorkflow();
    const run = await SluiceTesting.harness(workflow).fireSchedule();
    expect(run).toMatchObject({ state: 'failed', failures: 1, maxAttempts: 3 });
    expect(run.attempts).toHaveLength(1);
    expect(run.error).toBeInstanceOf(InputValidationError);
    expect((run.error as Error).message).toMatch(/^input: .*input\.n: /);
    expect(workflow.calls).toBe(0);
  });
});
