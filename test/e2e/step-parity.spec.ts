import type Redis from 'ioredis';
import { RunContext, Step, TimeoutError, Workflow } from '../../lib';
import { SluiceTesting } from '../../lib/testing';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';

/** The step memo of a run as stored in Redis (`step:<key>` fields of its hash), decoded. */
async function storedMemo(redis: Redis, namespace: string, runId: string): Promise<Record<string, unknown>> {
  const fields = await redis.hgetall(`{sluice:${namespace}}:run:${runId}`);
  const memo: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(fields))
    if (field.startsWith('step:') && !field.startsWith('step:@')) memo[field.slice('step:'.length)] = JSON.parse(value);
  return memo;
}

/** Never settles: code that ignores its signal. */
const forever = () => new Promise<never>(() => undefined);

/**
 * Deterministic on its input and on the attempt and try numbers, so a worker and the harness
 * must take the same path: `failTries` failing tries of a step retried in place, a step that
 * hangs past its limit on the first attempt (`hangStep`), or a run that does (`hangRun`).
 */
@Workflow('parity.limits', { attempts: 2, backoff: { delayMs: 0 } })
class LimitsWorkflow {
  async run(
    input: { failTries: number; hangStep?: boolean; hangRun?: boolean },
    ctx: RunContext,
  ): Promise<{ quote: string; charge: string; attempt: number }> {
    const quote = await this.quote(input.failTries);
    if (input.hangRun && ctx.attempt === 1) await forever();
    const charge = await ctx.step(
      'charge',
      async ({ attempt, signal }) => {
        if (input.hangStep && ctx.attempt === 1) await forever();
        return `charged on try ${attempt}, signal ${signal.aborted ? 'aborted' : 'live'}`;
      },
      { timeoutMs: 150 },
    );
    return { quote, charge, attempt: ctx.attempt };
  }

  private quoteCalls = 0;
  @Step({ attempts: 3, backoff: { delayMs: 0 } }) async quote(failTries: number): Promise<string> {
    this.quoteCalls++;
    if (this.quoteCalls <= failTries) throw new Error(`quote call ${this.quoteCalls} failed`);
    const calls = this.quoteCalls;
    this.quoteCalls = 0;
    return `quoted after ${calls} calls`;
  }
}

describe('the testing harness and a real worker agree on step options and time limits', () => {
  let t: TestApp;
  let redis: Redis;
  let namespace: string;

  beforeAll(async () => {
    namespace = uniqueNamespace('parity-limits');
    t = await createApp([LimitsWorkflow], { namespace });
    redis = rawRedis();
  });
  afterAll(async () => {
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  async function both(id: string, input: Parameters<LimitsWorkflow['run']>[0], runTimeoutMs?: number) {
    const production = await t.client.run(LimitsWorkflow, input, { id, timeoutMs: 10_000, ...(runTimeoutMs && { runTimeoutMs }) });
    const info = await t.client.get(id);
    const local = await SluiceTesting.harness(new LimitsWorkflow()).run(input, { id, ...(runTimeoutMs && { runTimeoutMs }) });
    expect(local.state).toBe('completed');
    expect(local.result).toEqual(production);
    expect(local.memo).toEqual(await storedMemo(redis, namespace, id));
    expect({ attempts: local.attempts.length, failures: local.failures }).toEqual({ attempts: info?.attempts, failures: info?.failures });
    return { production, local };
  }

  it('a step retried in place: same result, same memo, one attempt', async () => {
    const { production, local } = await both('limits-retry', { failTries: 2 });
    expect(production.quote).toBe('quoted after 3 calls');
    expect(local.attempts[0].steps.map((s) => [s.key, s.tries])).toEqual([
      ['quote#1', 3],
      ['charge#1', undefined],
    ]);
  });

  it('a step past its limit fails the attempt with TimeoutError in both; the retry replays the steps before it', async () => {
    const { production, local } = await both('limits-step', { failTries: 0, hangStep: true });
    expect(production).toEqual({ quote: 'quoted after 1 calls', charge: 'charged on try 1, signal live', attempt: 2 });
    expect(local.attempts[0].error).toBeInstanceOf(TimeoutError);
    expect(local.attempts[0].error).toMatchObject({ step: 'charge#1', limitMs: 150 });
    expect(local.attempts[1].replayed).toEqual(['quote#1']);
  });

  it("a run past the enqueue's runTimeoutMs fails the attempt with TimeoutError in both", async () => {
    const { production, local } = await both('limits-run', { failTries: 0, hangRun: true }, 200);
    expect(production.attempt).toBe(2);
    expect(local.attempts[0].error).toMatchObject({ name: 'TimeoutError', runId: 'limits-run', limitMs: 200, step: undefined });
  });
});
