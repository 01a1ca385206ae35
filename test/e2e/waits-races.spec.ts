import type Redis from 'ioredis';
import { RunContext, RunEvents, Workflow } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter } from '../support/workflows';

/**
 * Steps running beside a wait being committed: a wait lets the steps executing now land before
 * the run gives up its lease. One that lands is replayed after the wait; one that fails (and is
 * not caught) fails the attempt — the run must not go to sleep over the failure.
 */
const effects = new Counter();

@Workflow('wr.beside', { attempts: 1 })
class Beside {
  async run(input: { mode: 'ok' | 'fail' | 'caught' }, ctx: RunContext) {
    const step = ctx.step('slow', async () => {
      effects.inc(`slow:${ctx.runId}`);
      await new Promise((resolve) => setTimeout(resolve, 30));
      if (input.mode !== 'ok') throw new Error(`slow step failed on attempt ${ctx.attempt}`);
      return 'landed';
    });
    const guarded = input.mode === 'caught' ? step.catch((error: Error) => `caught: ${error.message}`) : step;
    const [value] = await Promise.all([guarded, ctx.sleep('nap', 150)]);
    await ctx.step('after', () => effects.inc(`after:${ctx.runId}`));
    return { value, attempt: ctx.attempt };
  }
}

describe('durable waits: steps beside a wait', () => {
  const ns = uniqueNamespace('wrc');
  let redis: Redis;
  let worker: TestApp;
  const events: Array<{ event: string; runId: string; attempt: number; willRetry?: boolean }> = [];
  const onEvent: Array<() => void> = [];

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Beside], { namespace: ns, worker: { concurrency: 4 } });
    const runEvents = worker.app.get(RunEvents);
    for (const event of ['failed', 'suspended', 'completed'] as const) {
      runEvents.on(event, (e) => {
        events.push({ event, runId: e.runId, attempt: e.attempt, ...('willRetry' in e && { willRetry: e.willRetry }) });
        onEvent.splice(0).forEach((notify) => notify());
      });
    }
  });
  afterAll(async () => {
    await worker.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const eventsOf = (id: string) => events.filter((e) => e.runId === id).map(({ runId: _, ...rest }) => rest);
  /**
   * The run's events once its final one ('completed', or 'failed' for good) has fired. A waiter's
   * result travels on the subscriber connection, the commit's reply (after which the worker emits
   * the event) on another: either may arrive first.
   */
  const finalEventsOf = async (id: string) => {
    const final = () => eventsOf(id).some((e) => e.event === 'completed' || e.willRetry === false);
    while (!final()) await new Promise<void>((resolve) => onEvent.push(resolve));
    return eventsOf(id);
  };

  it('a step that lands beside a sleep is saved before the run suspends and replayed after it', async () => {
    const run = await worker.client.enqueue('wr.beside', { mode: 'ok' });
    expect(await run.result({ timeoutMs: 10_000 })).toEqual({ value: 'landed', attempt: 2 });
    expect(effects.get(`slow:${run.id}`)).toBe(1);
    expect(effects.get(`after:${run.id}`)).toBe(1);
    expect(await finalEventsOf(run.id)).toEqual([
      { event: 'suspended', attempt: 1 },
      { event: 'completed', attempt: 2 },
    ]);
  });

  it('a step failure the code catches does not stop the sleep: the run resumes and completes', async () => {
    const run = await worker.client.enqueue(Beside, { mode: 'caught' });
    const result = await run.result({ timeoutMs: 10_000 });
    expect(result.attempt).toBe(2);
    expect(result.value).toMatch(/^caught: slow step failed on attempt \d$/);
  });

  /*
   * BUG: RunWaits.wait (lib/execution/run.waits.ts) waits for the steps executing beside it to settle,
   * then commits the suspend unless the guard was aborted — but a step that merely failed aborts
   * nothing. The run's own promise has rejected meanwhile; the suspend script lands first and the
   * run goes to sleep holding the failure nowhere (failures 0). RunExecutor.fail then sends
   * fail.lua, which finds the lease gone but `ended` = '<token>:suspended' and answers
   * 'suspended' (its reply for a retried call); the executor takes any non-'retry' reply as
   * final: it emits 'failed' { willRetry: false } (and logs "failed for good") for a run that is
   * sleeping. On resume the failed step runs again: a run with attempts: 1 executes its failing
   * step twice and reports two final failures. Expected: the attempt fails with the step's error,
   * once, and the run (attempts: 1) fails for good without suspending.
   */
  it('a step that fails beside a sleep fails the attempt: no suspend, the step ran once', async () => {
    const run = await worker.client.enqueue('wr.beside', { mode: 'fail' });
    await expect(run.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ causeMessage: 'slow step failed on attempt 1' });
    expect(await worker.client.get(run.id)).toMatchObject({ state: 'failed', attempts: 1, failures: 1, maxAttempts: 1 });
    expect(effects.get(`slow:${run.id}`)).toBe(1);
    expect(effects.get(`after:${run.id}`)).toBe(0);
    expect(await finalEventsOf(run.id)).toEqual([{ event: 'failed', attempt: 1, willRetry: false }]);
  });

  it('the namespace is consistent at rest', async () => {
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });
});
