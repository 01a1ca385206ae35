import { Module, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { InvalidOptionError } from '../errors';
import { occurrencesAfter } from '../workflow/cron.plan';
import { checkScheduleTiming } from '../workflow/schedule.timing';
import type { CronTiming, IntervalTiming } from '../interfaces/schedule.options';
import { checkName } from '../util/names';
import type { WorkflowClass, WorkflowInput, WorkflowInstance, WorkflowOutput } from '../workflow/workflow.types';
import { checkOptionKeys } from '../util/option-keys';
import { SLUICE_TESTING_OPTIONS, type HarnessOptions, type SluiceTestingOptions } from './harness.types';
import { WorkflowHarness } from './workflow.harness';

/** Input type of a workflow instance's `run`. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any in an infer pattern matches every run signature; public type (API report)
type InstanceInput<W> = W extends { run(input: infer I, ...rest: any[]): any } ? I : unknown;
/** Output type of a workflow instance's `run`. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any in an infer pattern matches every run signature; public type (API report)
type InstanceOutput<W> = W extends { run(...args: any[]): infer O } ? Awaited<O> : unknown;

/**
 * Unit-testing helpers for workflows: run a `@Workflow` in-process, without Redis, with the
 * semantics of a worker (see {@link WorkflowHarness}). Import from `nest-sluice/testing`.
 *
 * @example
 * // With the providers the workflow needs (a Nest application context, no QueueModule):
 * const harness = await SluiceTesting.create(OrderWorkflow, { providers: [{ provide: Billing, useValue: fakeBilling }] });
 * harness.failStep('charge', { onAttempt: 1 });
 * const run = await harness.run({ orderId: 'o-1' });
 * expect(run.attempts[1].replayed).toEqual(['createInvoice#1']);
 * await harness.close();
 *
 * // Or from a TestingModule you built with @nestjs/testing (e.g. to use overrideProvider):
 * const moduleRef = await Test.createTestingModule({ providers: [OrderWorkflow, Billing] }).compile();
 * const harness = SluiceTesting.harness(moduleRef.get(OrderWorkflow));
 */
export class SluiceTesting {
  private constructor() {}

  /**
   * Builds a Nest application context holding `workflow` and `options.providers`/`imports`
   * (no `QueueModule`, no Redis), and returns a harness on the workflow instance. Call
   * `harness.close()` at the end to close the context (its providers' shutdown hooks run).
   */
  static async create<C extends WorkflowClass>(
    workflow: C,
    options: SluiceTestingOptions = {},
  ): Promise<WorkflowHarness<WorkflowInput<C>, WorkflowOutput<C>>> {
    if (options === null || typeof options !== 'object') throw new InvalidOptionError('SluiceTesting.create options', 'must be an object');
    // Before the application context is built: a typo fails fast, with nothing to close.
    checkOptionKeys(options, SLUICE_TESTING_OPTIONS, 'SluiceTesting.create options');
    const { providers = [], imports = [], ...harnessOptions } = options;
    if (!Array.isArray(providers)) throw new InvalidOptionError('providers', 'must be an array of Nest providers');
    class SluiceTestingModule {}
    Module({ imports, providers: [workflow as unknown as Type, ...providers] })(SluiceTestingModule);
    // abortOnError: false, or Nest would exit the process on a missing provider instead of rejecting.
    const context = await NestFactory.createApplicationContext(SluiceTestingModule, { logger: false, abortOnError: false });
    try {
      const instance = context.get(workflow as unknown as Type<WorkflowInstance<WorkflowInput<C>, WorkflowOutput<C>>>);
      return new WorkflowHarness(instance, harnessOptions, () => context.close());
    } catch (error) {
      await context.close();
      throw error;
    }
  }

  /**
   * A harness on a workflow instance you made yourself: `moduleRef.get(OrderWorkflow)` from a
   * `Test.createTestingModule(…).compile()`, or `new OrderWorkflow(fakeBilling)`.
   * @throws WorkflowDefinitionError if its class has no `@Workflow` or no `run` method
   */
  static harness<W extends WorkflowInstance>(
    instance: W,
    options: HarnessOptions = {},
  ): WorkflowHarness<InstanceInput<W>, InstanceOutput<W>> {
    return new WorkflowHarness<InstanceInput<W>, InstanceOutput<W>>(instance, options);
  }

  /**
   * The next `count` fire times after `after` of a schedule made at runtime (`client.schedule`),
   * computed as the worker plans them. `id` seeds the `H` (hashed) fields, as the schedule id does.
   * @throws InvalidScheduleError for a bad cron expression, time zone or interval
   */
  static nextFireTimes(schedule: { id: string } & (CronTiming | IntervalTiming), after: Date | number, count = 5): Date[] {
    const id = checkName(schedule?.id, 'schedule.id');
    const pattern = checkScheduleTiming(schedule, 'schedule', id);
    const afterMs = after instanceof Date ? after.getTime() : after;
    if (!Number.isFinite(afterMs)) throw new InvalidOptionError('after', `must be a valid Date or ms, got ${String(after)}`);
    if (!Number.isInteger(count) || count < 1 || count > 1_000)
      throw new InvalidOptionError('count', `must be an integer 1–1000, got ${count}`);
    return occurrencesAfter(pattern, afterMs, count).map((ms) => new Date(ms));
  }
}
