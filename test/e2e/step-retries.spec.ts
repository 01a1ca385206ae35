import type Redis from 'ioredis';
import {
  NonRetryableError,
  RunContext,
  RunEvents,
  RunFailedEvent,
  Step,
  StepCallOptions,
  TimeoutError,
  Workflow,
  WorkflowFailedError,
} from '../../lib';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter, Gates } from '../support/workflows';

const counts = new Counter();
const gates = new Gates();
const happened = new Gates();
/** Events in the order they happened, by run id. */
const logs = new Map<string, string[]>();
/** Abort reasons seen, by `runId:what`. */
const reasons = new Map<string, unknown>();

function log(runId: string, entry: string): void {
  logs.set(runId, [...(logs.get(runId) ?? []), entry]);
  happened.open(`${runId}:${entry}`);
}

/** One run attempt at most: anything retried here is retried in place by the step. */
@Workflow('stepretry.flaky', { attempts: 1 })
class FlakyStepWorkflow {
  async run(input: { failures: number }, ctx: RunContext): Promise<{ before: number; flaky: string; after: number }> {
    counts.inc(`${ctx.runId}:run`);
    log(ctx.runId, 'run');
    const before = await this.before(ctx.runId);
    const flaky = await ctx.step(
      'flaky',
      ({ attempt }) => {
        counts.inc(`${ctx.runId}:flaky`);
        log(ctx.runId, `flaky try ${attempt}`);
        if (attempt <= input.failures) throw new Error(`flaky try ${attempt} failed`);
        return `ok on try ${attempt}`;
      },
      { attempts: 3, backoff: { delayMs: 5 } },
    );
    const after = await this.after(ctx.runId);
    return { before, flaky, after };
  }

  @Step() async before(runId: string): Promise<number> {
    log(runId, 'before');
    return counts.inc(`${runId}:before`);
  }

  @Step() async after(runId: string): Promise<number> {
    log(runId, 'after');
    return counts.inc(`${runId}:after`);
  }
}

@Workflow('stepretry.decorated', { attempts: 1 })
class DecoratedRetryWorkflow {
  async run(_input: unknown, ctx: RunContext): Promise<string> {
    return this.charge(ctx.runId);
  }

  @Step({ attempts: 2, backoff: { delayMs: 0 } }) async charge(runId: string): Promise<string> {
    const n = counts.inc(`${runId}:charge`);
    if (n === 1) throw new Error('gateway hiccup');
    return `charged on call ${n}`;
  }
}

@Workflow('stepretry.rejecting', { attempts: 1 })
class RejectingStepWorkflow {
  async run(_input: unknown, ctx: RunContext): Promise<never> {
    return ctx.step(
      'reject',
      () => {
        counts.inc(`${ctx.runId}:reject`);
        throw new NonRetryableError('card declined');
      },
      { attempts: 5, backoff: { delayMs: 0 } },
    );
  }
}

/** Step limits: the first attempt's step ignores its signal; the second's finishes at once. */
@Workflow('stepretry.slow', { attempts: 2, backoff: { delayMs: 0 } })
class SlowStepWorkflow {
  async run(input: { hangTries: number; stepAttempts: number; swallow?: boolean }, ctx: RunContext): Promise<string> {
    const attempt = ctx.attempt;
    ctx.signal.addEventListener('abort', () => reasons.set(`${ctx.runId}:run:${attempt}`, ctx.signal.reason));
    await ctx.step('first', () => counts.inc(`${ctx.runId}:first`));
    const slow = ctx.step(
      'slow',
      async (step) => {
        step.signal.addEventListener('abort', () => reasons.set(`${ctx.runId}:step:${attempt}:${step.attempt}`, step.signal.reason));
        log(ctx.runId, `slow ${attempt}.${step.attempt}`);
        // Hangs, ignoring its signal, on the first attempt's first `input.hangTries` tries.
        if (attempt === 1 && step.attempt <= input.hangTries) await gates.get(`${ctx.runId}:${step.attempt}`).promise;
        return `slow done on ${attempt}.${step.attempt}`;
      },
      { timeoutMs: 150, attempts: input.stepAttempts, backoff: { delayMs: 0 } },
    );
    if (!input.swallow) return slow;
    // Catching the TimeoutError does not save the attempt: it failed when the step's last try timed out.
    const value = await slow.catch((error: unknown) => `swallowed ${(error as Error).name}`);
    log(ctx.runId, `after slow: ${value}`);
    return value;
  }
}

/** A step waiting a long backoff while the run's own limit runs out. */
@Workflow('stepretry.backoff-abort', { attempts: 1, timeoutMs: 200 })
class BackoffAbortWorkflow {
  async run(_input: unknown, ctx: RunContext): Promise<string> {
    return ctx
      .step(
        'waits',
        ({ attempt }) => {
          log(ctx.runId, `waits try ${attempt}`);
          throw new Error(`try ${attempt} failed`);
        },
        { attempts: 3, backoff: { delayMs: 600_000 } },
      )
      .catch((error: Error) => {
        log(ctx.runId, `step gave up: ${error.message}; run signal ${ctx.signal.aborted ? 'aborted' : 'live'}`);
        throw error;
      });
  }
}

/** Calls ctx.step with options the test passes in: bad ones fail the run, before the step runs. */
@Workflow('stepretry.bad-options', { attempts: 3, backoff: { delayMs: 0 } })
class BadOptionsWorkflow {
  async run(input: { options: unknown }, ctx: RunContext): Promise<string> {
    counts.inc(`${ctx.runId}:run`);
    return ctx.step(
      'guarded',
      () => {
        counts.inc(`${ctx.runId}:guarded`);
        return 'ran';
      },
      input.options as StepCallOptions,
    );
  }
}

describe('per-step retries and step time limits', () => {
  let t: TestApp;
  let redis: Redis;
  let namespace: string;
  const failures: RunFailedEvent[] = [];

  beforeAll(async () => {
    namespace = uniqueNamespace('stepretry');
    t = await createApp(
      [FlakyStepWorkflow, DecoratedRetryWorkflow, RejectingStepWorkflow, SlowStepWorkflow, BackoffAbortWorkflow, BadOptionsWorkflow],
      { namespace },
    );
    t.app.get(RunEvents).on('failed', (event) => failures.push(event));
    redis = rawRedis();
  });
  afterAll(async () => {
    gates.openAll();
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('retries a flaky step in place until its 3rd try succeeds, running the steps around it once', async () => {
    const result = await t.client.run(FlakyStepWorkflow, { failures: 2 }, { id: 'flaky-3', timeoutMs: 10_000 });
    expect(result).toEqual({ before: 1, flaky: 'ok on try 3', after: 1 });
    expect(logs.get('flaky-3')).toEqual(['run', 'before', 'flaky try 1', 'flaky try 2', 'flaky try 3', 'after']);
    expect([counts.get('flaky-3:run'), counts.get('flaky-3:before'), counts.get('flaky-3:flaky'), counts.get('flaky-3:after')]).toEqual([
      1, 1, 3, 1,
    ]);
    // Never failed as a run: one attempt, no failure, the slot held throughout.
    expect(await t.client.get('flaky-3')).toMatchObject({ state: 'completed', attempts: 1, failures: 0 });
    expect(failures.filter((f) => f.runId === 'flaky-3')).toEqual([]);
  });

  it('fails the run attempt with the last error once the step has no tries left', async () => {
    const error = await t.client.run(FlakyStepWorkflow, { failures: 3 }, { id: 'flaky-out', timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    expect(error).toMatchObject({ causeMessage: 'flaky try 3 failed' });
    expect(logs.get('flaky-out')).toEqual(['run', 'before', 'flaky try 1', 'flaky try 2', 'flaky try 3']);
  });

  it('retries a @Step({ attempts }) method in place', async () => {
    await expect(t.client.run(DecoratedRetryWorkflow, {}, { id: 'decorated', timeoutMs: 10_000 })).resolves.toBe('charged on call 2');
    expect(await t.client.get('decorated')).toMatchObject({ attempts: 1, failures: 0 });
  });

  it('does not retry a NonRetryableError', async () => {
    const error = await t.client.run(RejectingStepWorkflow, {}, { id: 'rejecting', timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ causeName: 'NonRetryableError', causeMessage: 'card declined' });
    expect(counts.get('rejecting:reject')).toBe(1);
  });

  it("fails the attempt when a step's last try times out, aborting the step's and the run's signals", async () => {
    const result = await t.client.run(SlowStepWorkflow, { hangTries: 1, stepAttempts: 1 }, { id: 'slow-1', timeoutMs: 10_000 });
    expect(result).toBe('slow done on 2.1');
    expect(logs.get('slow-1')).toEqual(['slow 1.1', 'slow 2.1']);
    const stepReason = reasons.get('slow-1:step:1:1');
    expect(stepReason).toBeInstanceOf(TimeoutError);
    expect(stepReason).toMatchObject({ runId: 'slow-1', limitMs: 150, step: 'slow#1' });
    expect(reasons.get('slow-1:run:1')).toBe(stepReason);
    expect(failures.filter((f) => f.runId === 'slow-1').map((f) => f.error)).toEqual([
      { name: 'TimeoutError', message: 'Step "slow#1" of run slow-1 timed out after 150 ms' },
    ]);
    // The step before ran once and was replayed by the second attempt.
    expect(counts.get('slow-1:first')).toBe(1);
  });

  it('retries a timed-out try in place when the step has tries left: the run attempt goes on', async () => {
    const result = await t.client.run(SlowStepWorkflow, { hangTries: 1, stepAttempts: 2 }, { id: 'slow-2', timeoutMs: 10_000 });
    expect(result).toBe('slow done on 1.2');
    expect(logs.get('slow-2')).toEqual(['slow 1.1', 'slow 1.2']);
    expect(reasons.get('slow-2:step:1:1')).toMatchObject({ step: 'slow#1', limitMs: 150 });
    expect(reasons.has('slow-2:run:1')).toBe(false);
    expect(await t.client.get('slow-2')).toMatchObject({ state: 'completed', attempts: 1, failures: 0 });
  });

  it("fails the attempt even when the run catches the step's TimeoutError", async () => {
    const result = await t.client.run(
      SlowStepWorkflow,
      { hangTries: 1, stepAttempts: 1, swallow: true },
      { id: 'slow-swallow', timeoutMs: 10_000 },
    );
    expect(result).toBe('slow done on 2.1');
    // The first attempt carried on after catching, but its result was never taken: the second attempt's was.
    expect(logs.get('slow-swallow')).toEqual([
      'slow 1.1',
      'after slow: swallowed TimeoutError',
      'slow 2.1',
      'after slow: slow done on 2.1',
    ]);
    expect(failures.filter((f) => f.runId === 'slow-swallow').map((f) => f.error.name)).toEqual(['TimeoutError']);
  });

  it.each([
    ['timeoutMs 0', { timeoutMs: 0 }, 'timeoutMs'],
    ['attempts 1.5', { attempts: 1.5 }, 'attempts'],
    ['backoff.factor -1', { attempts: 2, backoff: { delayMs: 0, factor: -1 } }, 'backoff.factor'],
  ])(
    'fails the run for good on bad ctx.step options (%s): the step never runs, nothing of it is written',
    async (label, options, field) => {
      const id = `bad-options-${label.replace(/[^a-z0-9]/gi, '-')}`;
      const error = await t.client.run(BadOptionsWorkflow, { options }, { id, timeoutMs: 10_000 }).catch((e: unknown) => e);
      expect(error).toMatchObject({ causeName: 'InvalidOptionError' });
      expect((error as WorkflowFailedError).causeMessage).toMatch(
        new RegExp(`^ctx\\.step\\("guarded"\\) options\\.${field.replace('.', '\\.')}:`),
      );
      expect([counts.get(`${id}:run`), counts.get(`${id}:guarded`)]).toEqual([1, 0]);
      const fields = await redis.hkeys(`{sluice:${namespace}}:run:${id}`);
      expect(fields.filter((f) => f.startsWith('step:') && !f.startsWith('step:@'))).toEqual([]);
    },
  );

  it('ends a backoff wait early when the run signal aborts, without another try', async () => {
    const error = await t.client.run(BackoffAbortWorkflow, {}, { id: 'backoff-abort', timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ causeName: 'TimeoutError', causeMessage: 'Run backoff-abort timed out after 200 ms' });
    // The step, waiting 10 minutes for its 2nd try, gave up when the run's limit aborted its signal.
    await happened.get('backoff-abort:step gave up: try 1 failed; run signal aborted').promise;
    expect(logs.get('backoff-abort')).toEqual(['waits try 1', 'step gave up: try 1 failed; run signal aborted']);
  });
});
