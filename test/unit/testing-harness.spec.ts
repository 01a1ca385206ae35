import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import {
  InvalidNameError,
  NonRetryableError,
  PayloadNotSerializableError,
  RedisUnavailableError,
  RunContext,
  StepMemoLimitError,
  Workflow,
  WorkflowDefinitionError,
  WorkflowFailedError,
  WorkflowOutput,
} from '../../lib';
import { SluiceTesting, WorkflowHarness } from '../../lib/testing';
import { BILLING, FakeBilling, OrderInput, ParityOrderWorkflow } from '../support/order.workflow';

const ISSUED = new Date('2026-01-02T03:04:05.000Z');
const CHARGED = new Date('2026-01-02T03:04:06.000Z');

/** What the workflow returns for `o-1`: Dates stay Dates, the undefined receiptUrl stays undefined. */
const EXPECTED_RESULT = {
  invoiceId: 'inv-o-1',
  issuedAt: ISSUED,
  charge: { chargeId: 'ch-inv-o-1', at: CHARGED, amount: 42, receiptUrl: undefined },
  audit: { note: 'charged ch-inv-o-1', seenAs: 'object' },
  finishedAt: new Date('2026-01-03T00:00:00.000Z'),
};

describe('SluiceTesting: a workflow unit test without Redis', () => {
  let billing: FakeBilling;
  let harness: WorkflowHarness<OrderInput, WorkflowOutput<typeof ParityOrderWorkflow>>;

  beforeEach(async () => {
    billing = new FakeBilling();
    harness = await SluiceTesting.create(ParityOrderWorkflow, {
      providers: [{ provide: BILLING, useValue: billing }],
      now: new Date('2026-03-02T08:00:00Z'),
    });
  });
  afterEach(() => harness.close());

  it('reproduces a retry that replays the finished steps', async () => {
    harness.failStep('charge', { onAttempt: 1, error: new Error('gateway timeout') });
    const run = await harness.run({ orderId: 'o-1' }, { id: 'order-o-1' });

    expect(run.state).toBe('completed');
    expect(run.runId).toBe('order-o-1');
    expect(run.attempts.map((a) => a.outcome)).toEqual(['retry', 'completed']);
    const [first, second] = run.attempts;
    expect(first).toMatchObject({ attempt: 1, executed: ['createInvoice#1'], failed: ['charge#1'], replayed: [], retryDelayMs: 20 });
    expect((first.error as Error).message).toBe('gateway timeout');
    expect(second).toMatchObject({ attempt: 2, replayed: ['createInvoice#1'], executed: ['charge#1', 'audit#1'], failed: [] });
    // The nested ctx.step('audit.note') is part of audit#1, not a step of its own.
    expect(second.steps.map((s) => s.key)).toEqual(['createInvoice#1', 'charge#1', 'audit#1']);
    // Side effects: the invoice was created once (replayed on attempt 2), the charge once (the injected failure stood in for it).
    expect(billing.invoices).toBe(1);
    expect(billing.charges).toBe(1);
    // The backoff was reported and added to the fake clock, not slept.
    expect(run.retryDelaysMs).toEqual([20]);
    expect(second.startedAt.getTime() - first.startedAt.getTime()).toBe(20);
    expect(run.result).toEqual(EXPECTED_RESULT);
  });

  it('reproduces a NonRetryableError: the run fails for good on its first attempt', async () => {
    const run = await harness.run({ orderId: 'bad-1' });

    expect(run.state).toBe('failed');
    expect(run.attempts).toHaveLength(1);
    expect(run.attempts[0]).toMatchObject({ outcome: 'failed', executed: ['createInvoice#1'] });
    expect(run.failures).toBe(1);
    expect(run.maxAttempts).toBe(3);
    expect(run.error).toBeInstanceOf(NonRetryableError);
    expect(run.failure).toBeInstanceOf(WorkflowFailedError);
    expect(run.failure).toMatchObject({
      runId: run.runId,
      workflow: 'parity.order',
      causeName: 'NonRetryableError',
      causeMessage: 'order bad-1 is invalid',
    });
    expect(run.retryDelaysMs).toEqual([]);
  });

  it('a step result takes the round trip production gives it: Dates stay Dates, undefined stays', async () => {
    const run = await harness.run({ orderId: 'o-1' });

    expect(run.state).toBe('completed');
    expect(run.result).toEqual(EXPECTED_RESULT);
    // The run saw Dates on its first attempt already (audit.seenAs), as a replay would.
    expect(run.memo).toEqual({
      'createInvoice#1': { id: 'inv-o-1', issuedAt: ISSUED },
      'charge#1': { chargeId: 'ch-inv-o-1', at: CHARGED, amount: 42, receiptUrl: undefined },
      'audit#1': { note: 'charged ch-inv-o-1', seenAs: 'object' },
    });
    expect('receiptUrl' in (run.memo['charge#1'] as object)).toBe(true);
  });

  it('runs attempts until they are exhausted, with the backoff growing by its factor', async () => {
    billing.failNextCharges = 10;
    const run = await harness.run({ orderId: 'o-2' });

    expect(run.state).toBe('failed');
    expect(run.attempts.map((a) => a.outcome)).toEqual(['retry', 'retry', 'failed']);
    expect(run.retryDelaysMs).toEqual([20, 40]);
    expect(run.failure?.causeMessage).toBe('gateway timeout charging inv-o-2');
    expect(run.finishedAt.getTime() - run.dueAt.getTime()).toBe(60);
    expect(billing.invoices).toBe(1);
  });

  it("opts.attempts overrides the workflow's, as on enqueue", async () => {
    billing.failNextCharges = 10;
    const run = await harness.run({ orderId: 'o-3' }, { attempts: 1 });
    expect(run.attempts.map((a) => a.outcome)).toEqual(['failed']);
    expect(run.maxAttempts).toBe(1);
  });

  it("failStep when: 'after' executes the step, loses its result, and executes it again on the next attempt", async () => {
    harness.failStep('charge', { onAttempt: 1, when: 'after' });
    const run = await harness.run({ orderId: 'o-4' });

    expect(run.attempts.map((a) => [a.executed, a.failed, a.replayed])).toEqual([
      [['createInvoice#1'], ['charge#1'], []],
      [['charge#1', 'audit#1'], [], ['createInvoice#1']],
    ]);
    expect(billing.charges).toBe(2); // at-least-once: the side effect happened twice
  });

  it('a failStep with a NonRetryableError fails the run for good; clearFailures removes it', async () => {
    harness.failStep('charge', { error: new NonRetryableError('card declined') });
    const failed = await harness.run({ orderId: 'o-5' });
    expect(failed.state).toBe('failed');
    expect(failed.attempts).toHaveLength(1);

    harness.clearFailures();
    expect((await harness.run({ orderId: 'o-5' })).state).toBe('completed');
  });

  it('a delay moves the fake clock to the due time instead of sleeping', async () => {
    const start = harness.clock.now();
    const run = await harness.run({ orderId: 'o-6' }, { delayMs: '10m' });
    expect(run.enqueuedAt.getTime()).toBe(start);
    expect(run.dueAt.getTime()).toBe(start + 600_000);
    expect(run.attempts[0].startedAt.getTime()).toBe(start + 600_000);
    expect(harness.clock.now()).toBe(start + 600_000);
  });

  it('rejects bad input before anything runs, with the errors enqueue throws', async () => {
    await expect(harness.run({ orderId: 'x', when: new WeakMap() } as never)).rejects.toBeInstanceOf(PayloadNotSerializableError);
    await expect(harness.run({ orderId: 'x' }, { id: 'a b' })).rejects.toBeInstanceOf(InvalidNameError);
    expect(billing.invoices).toBe(0);
  });
});

describe('SluiceTesting.harness on an instance from Test.createTestingModule', () => {
  it('runs the instance Nest built (e.g. with overrideProvider)', async () => {
    const billing = new FakeBilling();
    const moduleRef = await Test.createTestingModule({
      providers: [ParityOrderWorkflow, { provide: BILLING, useValue: new FakeBilling() }],
    })
      .overrideProvider(BILLING)
      .useValue(billing)
      .compile();
    const harness = SluiceTesting.harness(moduleRef.get(ParityOrderWorkflow));
    const run = await harness.run({ orderId: 'o-7' });
    expect(run.state).toBe('completed');
    expect(billing.invoices).toBe(1);
    await moduleRef.close();
  });

  it('refuses an instance of a class without @Workflow', () => {
    class Plain {
      async run(): Promise<void> {}
    }
    expect(() => SluiceTesting.harness(new Plain())).toThrow(WorkflowDefinitionError);
  });
});

@Workflow('harness.report', {
  attempts: 2,
  schedules: [
    { id: 'report.morning', cron: '0 9 * * MON-FRI', tz: 'Europe/Berlin', input: { kind: 'morning' } },
    { id: 'report.hourly', cron: '@hourly' },
  ],
})
class ReportWorkflow {
  inputs: unknown[] = [];
  async run(input: { kind: string } | null, ctx: RunContext) {
    this.inputs.push(input);
    const parts = [];
    for (let i = 0; i < 3; i++) parts.push(await ctx.step('part', () => ({ i, at: new Date(0) })));
    return { parts, runId: ctx.runId };
  }
}

describe('schedules and the fake clock', () => {
  it("lists the declared schedules' next fire times for the fake now (time zone and DST as the worker plans them)", () => {
    // Friday 2026-03-27 10:00 UTC; Berlin moves to summer time on Sunday 2026-03-29.
    const harness = SluiceTesting.harness(new ReportWorkflow(), { now: new Date('2026-03-27T10:00:00Z') });
    const [morning, hourly] = harness.schedules(3);
    expect(morning).toEqual({
      id: 'report.morning',
      cron: '0 9 * * MON-FRI',
      tz: 'Europe/Berlin',
      input: { kind: 'morning' },
      next: [new Date('2026-03-30T07:00:00Z'), new Date('2026-03-31T07:00:00Z'), new Date('2026-04-01T07:00:00Z')],
    });
    expect(hourly).toMatchObject({
      id: 'report.hourly',
      input: null,
      next: [new Date('2026-03-27T11:00:00Z'), new Date('2026-03-27T12:00:00Z'), new Date('2026-03-27T13:00:00Z')],
    });
    harness.clock.set(new Date('2026-03-31T07:00:00Z'));
    expect(harness.nextFireTimes('report.morning', 1)).toEqual([new Date('2026-04-01T07:00:00Z')]);
  });

  it('fires a schedule: the clock moves to the occurrence and the run gets the id and input the worker gives it', async () => {
    const workflow = new ReportWorkflow();
    const harness = SluiceTesting.harness(workflow, { now: new Date('2026-03-27T10:00:00Z') });
    const run = await harness.fireSchedule('report.morning');
    const at = Date.parse('2026-03-30T07:00:00Z');
    expect(run.runId).toBe(`report.morning@${at}`);
    expect(harness.clock.now()).toBe(at);
    expect(workflow.inputs).toEqual([{ kind: 'morning' }]);
    // A step in a loop memoizes each call: part#1..3.
    expect(run.attempts[0].executed).toEqual(['part#1', 'part#2', 'part#3']);
    expect(run.result).toEqual({ parts: [0, 1, 2].map((i) => ({ i, at: new Date(0) })), runId: run.runId });
    expect(() => harness.nextFireTimes()).toThrow(/scheduleId: is required/);
  });

  it('lists the fire times of a schedule made at runtime', () => {
    expect(
      SluiceTesting.nextFireTimes({ id: 'digest', cron: '30 6 * * *', tz: 'America/New_York' }, new Date('2026-11-01T00:00:00Z'), 2),
    ).toEqual([
      new Date('2026-11-01T11:30:00Z'), // after the fall-back change: UTC-5
      new Date('2026-11-02T11:30:00Z'),
    ]);
  });
});

describe('harness semantics that mirror the worker', () => {
  it('the memo budget applies: a step past maxRunMemoBytes fails the run without retry', async () => {
    const harness = SluiceTesting.harness(new ReportWorkflow(), { maxRunMemoBytes: 60 });
    const run = await harness.run({ kind: 'x' });
    expect(run.state).toBe('failed');
    expect(run.attempts).toHaveLength(1);
    expect(run.error).toBeInstanceOf(StepMemoLimitError);
  });

  it("a RedisConnectionError the run's own code throws is an ordinary failure, as in a worker", async () => {
    @Workflow('harness.flaky-redis', { attempts: 2 })
    class FlakyRedis {
      calls = 0;
      async run(): Promise<string> {
        if (++this.calls === 1) throw new RedisUnavailableError('saveStep', 'Redis is away');
        return 'done';
      }
    }
    const run = await SluiceTesting.harness(new FlakyRedis()).run(undefined);
    expect(run.attempts.map((a) => a.outcome)).toEqual(['retry', 'completed']);
    expect(run.failures).toBe(1);
    expect(run.result).toBe('done');
  });

  it('a step call the recorder refuses (a reserved name) is not reported, and does not shift the keys after it', async () => {
    @Workflow('harness.reserved-step-name')
    class ReservedName {
      async run(_: unknown, ctx: RunContext): Promise<string> {
        const refused = await ctx.step('signal:go', () => 1).catch((error: unknown) => error);
        expect(refused).toBeInstanceOf(InvalidNameError);
        await ctx.step('signal:go', () => 1).catch(() => undefined);
        return ctx.step('ok', () => 'done');
      }
    }
    const run = await SluiceTesting.harness(new ReservedName()).run(undefined);
    expect(run.result).toBe('done');
    expect(run.attempts[0].steps.map((step) => step.key)).toEqual(['ok#1']);
    expect(run.attempts[0].failed).toEqual([]);
  });

  it('a step still running when a parallel one fails the attempt cannot save its result afterwards', async () => {
    let release!: () => void;
    const slow = new Promise<void>((resolve) => (release = resolve));
    @Workflow('harness.parallel', { attempts: 2, backoff: { delayMs: 0 } })
    class Parallel {
      async run(_: unknown, ctx: RunContext) {
        await Promise.all([
          ctx.step('slow', async () => (await slow, 'slow')),
          ctx.step('fast', () => {
            if (ctx.attempt === 1) throw new Error('fast failed');
            return 'fast';
          }),
        ]);
        return 'ok';
      }
    }
    const harness = SluiceTesting.harness(new Parallel());
    setTimeout(release, 10);
    const run = await harness.run(null);
    expect(run.attempts[0].steps).toEqual([
      { key: 'slow#1', name: 'slow', occurrence: 1, outcome: 'pending' },
      { key: 'fast#1', name: 'fast', occurrence: 1, outcome: 'failed' },
    ]);
    // Attempt 2 executed slow#1 again: attempt 1's late result was refused, as a lost lease's write is.
    expect(run.attempts[1].executed).toEqual(['slow#1', 'fast#1']);
    expect(run.result).toBe('ok');
  });
});
