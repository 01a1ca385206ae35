import type Redis from 'ioredis';
import { RunContext, Workflow } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter, pollUntil } from '../support/workflows';

/**
 * Cases a review of durable waits found: waits called where they cannot work are refused with a
 * typed error instead of hanging or waiting for ever, and the determinism guard neither fails a
 * run that took another branch nor lets a renamed wait strand its outcome.
 */
const effects = new Counter();
const renamed = new Set<string>();
const quoteFails = new Set<string>();

@Workflow('wv.in-step', { attempts: 2, backoff: { delayMs: 10 } })
class WaitInStep {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.step('outer', async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      await ctx.sleep('backoff', 20);
      return 'never';
    });
  }
}

@Workflow('wv.fallback', { attempts: 1 })
class Fallback {
  async run(_input: unknown, ctx: RunContext) {
    let quote: string;
    try {
      quote = await ctx.step('quote', () => {
        if (quoteFails.has(ctx.runId)) throw new Error('pricing down');
        return 'live';
      });
    } catch {
      quote = await ctx.step('cached-quote', () => 'cached');
    }
    quoteFails.delete(ctx.runId); // the pricing service is back for the replay
    const go = await ctx.waitForSignal<string>('go');
    return { quote, go: go.timedOut ? null : go.payload };
  }
}

@Workflow('wv.renamed-wait', { attempts: 3 })
class RenamedWait {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.step('before', () => effects.inc(`before:${ctx.runId}`));
    const answer = await ctx.waitForSignal<string>(renamed.has(ctx.runId) ? 'approve' : 'approval');
    return answer;
  }
}

@Workflow('wv.unknown-child', { attempts: 2, backoff: { delayMs: 10 } })
class UnknownChild {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.invoke('wv.nobody-runs-this', {});
  }
}

@Workflow('wv.bad-calls', { attempts: 1 })
class BadCalls {
  async run(_input: unknown, ctx: RunContext) {
    const errors: string[] = [];
    for (const name of ['@3', 'signal:x', 'event:y', 'invoke:z']) {
      await ctx.step(name, () => 1).catch((error: Error) => errors.push(`${error.name}: ${name}`));
    }
    await ctx.sleepUntil('far', new Date(Date.now() + 11 * 365 * 86_400_000)).catch((error: Error) => errors.push(`${error.name}: far`));
    return errors;
  }
}

describe('durable waits: cases from the review', () => {
  const ns = uniqueNamespace('wvr');
  let redis: Redis;
  let worker: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([WaitInStep, Fallback, RenamedWait, UnknownChild, BadCalls], { namespace: ns, worker: { concurrency: 4 } });
  });
  afterAll(async () => {
    await worker.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  it("a wait inside a step's fn fails the run without retry (it would wait for its own step)", async () => {
    const run = await worker.client.enqueue(WaitInStep, {});
    await expect(run.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ causeName: 'InvalidInputError' });
    expect(await worker.client.get(run.id)).toMatchObject({
      state: 'failed',
      attempts: 1,
      error: expect.objectContaining({ message: expect.stringContaining("cannot be called inside a step's fn") }),
    });
  });

  it('a caught step failure that took a fallback before the wait replays down the other branch without a NonDeterminismError', async () => {
    const id = `fallback-${ns}`;
    quoteFails.add(id);
    const run = await worker.client.enqueue(Fallback, {}, { id });
    await pollUntil(
      () => worker.client.get(run.id),
      (r) => r?.state === 'waiting-signal',
      'waiting',
    );
    // Attempt 1 recorded the failed quote, the fallback, then the wait.
    expect(await redis.hmget(`{sluice:${ns}}:run:${id}`, 'step:@0', 'step:@1', 'step:@2')).toEqual([
      'step:quote#1',
      'step:cached-quote#1',
      'signal:signal:go#1',
    ]);
    await worker.client.signal(run.id, 'go', 'yes');
    // The replay's quote succeeded (failures are not memoized), so the fallback is not called.
    expect(await run.result({ timeoutMs: 10_000 })).toEqual({ quote: 'live', go: 'yes' });
  });

  it('a wait renamed under a run that waits in it fails the run with NonDeterminismError instead of stranding the signal', async () => {
    const run = await worker.client.enqueue(RenamedWait, {});
    await pollUntil(
      () => worker.client.get(run.id),
      (r) => r?.state === 'waiting-signal',
      'waiting',
    );
    renamed.add(run.id);
    expect(await worker.client.signal(run.id, 'approval', 'ok')).toEqual({ delivered: true });
    await expect(run.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ causeName: 'NonDeterminismError' });
    expect((await worker.client.get(run.id))?.error?.message).toContain(
      'call #1 is signal:signal:approve#1, but the run recorded signal:signal:approval#1 there',
    );
    expect(effects.get(`before:${run.id}`)).toBe(1);
  });

  it('invoking a workflow no worker registered is an UnknownWorkflowError, retried, not a wait for ever', async () => {
    const run = await worker.client.enqueue(UnknownChild, {});
    await expect(run.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ causeName: 'UnknownWorkflowError' });
    expect(await worker.client.get(run.id)).toMatchObject({ state: 'failed', attempts: 2, failures: 2 });
    expect(await redis.exists(`{sluice:${ns}}:run:${run.id}/invoke:wv.nobody-runs-this#1`)).toBe(0);
  });

  it('step names the waits use and sleeps past 10 years are typed errors', async () => {
    expect(await worker.client.run(BadCalls, {}, { timeoutMs: 10_000 })).toEqual([
      'InvalidNameError: @3',
      'InvalidNameError: signal:x',
      'InvalidNameError: event:y',
      'InvalidNameError: invoke:z',
      'InvalidOptionError: far',
    ]);
  });

  it('the namespace is consistent at rest', async () => {
    await pollUntil(
      () => worker.client.stats(),
      (s) => Object.values(s.workflows).every((w) => w.active === 0),
      'no run active',
    );
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });
});
