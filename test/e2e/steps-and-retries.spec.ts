import type Redis from 'ioredis';
import { NonRetryableError, RunContext, Step, Workflow, WorkflowFailedError } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter } from '../support/workflows';

const counts = new Counter();
/** What each attempt of a run saw, by run id. */
const seen = new Map<string, Array<{ attempt: number; token: string; loop: number[] }>>();
const fast = { delayMs: 10 };

@Workflow('steps.flaky', { attempts: 3, backoff: fast })
class FlakyWorkflow {
  async run(input: { failStepOnce?: boolean }, ctx: RunContext): Promise<{ token: string; inline: number; loop: number[]; late: string }> {
    counts.inc(`${ctx.runId}:run`);
    const token = await this.issueToken(ctx.runId);
    const inline = await ctx.step('inline', () => {
      counts.inc(`${ctx.runId}:inline`);
      return token.length;
    });
    const loop: number[] = [];
    for (let i = 0; i < 3; i++) loop.push(await this.loopStep(ctx.runId, i));
    const late = await this.lateStep(ctx.runId, ctx.attempt, input.failStepOnce === true);
    seen.set(ctx.runId, [...(seen.get(ctx.runId) ?? []), { attempt: ctx.attempt, token, loop }]);
    if (ctx.attempt === 1 && !input.failStepOnce) throw new Error('flaky after the steps');
    return { token, inline, loop, late };
  }

  /** A value that differs on every execution, so a replay is visible. */
  @Step() async issueToken(runId: string): Promise<string> {
    counts.inc(`${runId}:issueToken`);
    return `${runId}/${Math.random()}`;
  }

  @Step({ name: 'loop-step' }) async loopStep(runId: string, i: number): Promise<number> {
    counts.inc(`${runId}:loop:${i}`);
    return i * 10 + counts.get(`${runId}:loop:${i}`);
  }

  @Step() async lateStep(runId: string, attempt: number, failOnce: boolean): Promise<string> {
    counts.inc(`${runId}:lateStep`);
    if (failOnce && attempt === 1) throw new Error('step failed once');
    return `late@${attempt}`;
  }
}

@Workflow('steps.non-retryable', { attempts: 5, backoff: fast })
class RejectingWorkflow {
  async run(input: { orderId: string }, ctx: RunContext): Promise<never> {
    counts.inc(`${ctx.runId}:run`);
    throw new NonRetryableError(`order ${input.orderId} is invalid`);
  }
}

@Workflow('steps.always-throws', { attempts: 3, backoff: fast })
class AlwaysThrowsWorkflow {
  async run(_input: unknown, ctx: RunContext): Promise<never> {
    const n = counts.inc(`${ctx.runId}:run`);
    throw new TypeError(`boom ${n} on attempt ${ctx.attempt}`);
  }
}

@Workflow('steps.bigint', { attempts: 3, backoff: fast })
class UnkeepableWorkflow {
  async run(input: { in: 'step' | 'result' }, ctx: RunContext): Promise<unknown> {
    counts.inc(`${ctx.runId}:run`);
    if (input.in === 'result') return { big: new WeakMap() };
    await ctx.step('big', () => {
      counts.inc(`${ctx.runId}:big`);
      return new WeakMap();
    });
    return 'unreachable';
  }
}

@Workflow('steps.attempts', { attempts: 4, backoff: fast })
class AttemptsWorkflow {
  async run(input: { succeedOn: number }, ctx: RunContext): Promise<number[]> {
    const attempts = [...(seen.get(ctx.runId)?.map((s) => s.attempt) ?? []), ctx.attempt];
    seen.set(
      ctx.runId,
      attempts.map((attempt) => ({ attempt, token: '', loop: [] })),
    );
    if (ctx.attempt < input.succeedOn) throw new Error(`not yet (${ctx.attempt})`);
    return attempts;
  }
}

async function failure(promise: Promise<unknown>): Promise<WorkflowFailedError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WorkflowFailedError);
  return error as WorkflowFailedError;
}

describe('steps and retries', () => {
  let t: TestApp;
  let namespace: string;
  let redis: Redis;
  const timeoutMs = 10_000;

  beforeAll(async () => {
    namespace = uniqueNamespace('steps');
    t = await createApp([FlakyWorkflow, RejectingWorkflow, AlwaysThrowsWorkflow, UnkeepableWorkflow, AttemptsWorkflow], { namespace });
    redis = rawRedis();
  });
  afterAll(async () => {
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  /** A run's step memo: the `step:<name>#<n>` fields of its record, by step key. */
  async function stepMemo(id: string): Promise<Record<string, string>> {
    const record = await redis.hgetall(new RedisKeys('sluice', namespace).run(id));
    return Object.fromEntries(
      Object.entries(record)
        .filter(([field]) => field.startsWith('step:') && !field.startsWith('step:@'))
        .map(([field, value]) => [field.slice('step:'.length), value]),
    );
  }

  it('a run that throws once after its steps replays every finished step without executing it again', async () => {
    const handle = await t.client.enqueue(FlakyWorkflow, {});
    const id = handle.id;
    const out = await handle.result({ timeoutMs });
    expect(counts.get(`${id}:run`)).toBe(2);
    expect(counts.get(`${id}:issueToken`)).toBe(1);
    expect(counts.get(`${id}:inline`)).toBe(1);
    expect([0, 1, 2].map((i) => counts.get(`${id}:loop:${i}`))).toEqual([1, 1, 1]);
    expect(counts.get(`${id}:lateStep`)).toBe(1);

    const attempts = seen.get(id)!;
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2]);
    expect(attempts[1].token).toBe(attempts[0].token); // the memoized value, not a new one
    expect(attempts[1].loop).toEqual(attempts[0].loop);
    expect(out).toEqual({ token: attempts[0].token, inline: attempts[0].token.length, loop: [1, 11, 21], late: 'late@1' });

    const memo = await stepMemo(id);
    expect(Object.keys(memo).sort()).toEqual(['inline#1', 'issueToken#1', 'lateStep#1', 'loop-step#1', 'loop-step#2', 'loop-step#3']);
    expect(await t.client.get(id)).toMatchObject({ state: 'completed', attempts: 2, failures: 1 });
  });

  it('a step that throws runs again on retry, while the steps before it do not', async () => {
    const handle = await t.client.enqueue(FlakyWorkflow, { failStepOnce: true });
    const id = handle.id;
    const out = await handle.result({ timeoutMs });
    expect(out.late).toBe('late@2');
    expect(counts.get(`${id}:lateStep`)).toBe(2);
    expect(counts.get(`${id}:issueToken`)).toBe(1);
    expect(counts.get(`${id}:inline`)).toBe(1);
    expect([0, 1, 2].map((i) => counts.get(`${id}:loop:${i}`))).toEqual([1, 1, 1]);
    expect(counts.get(`${id}:run`)).toBe(2);
  });

  it('NonRetryableError fails the run at once, and the waiter gets WorkflowFailedError with the cause', async () => {
    const handle = await t.client.enqueue(RejectingWorkflow, { orderId: 'A-17' });
    const error = await failure(handle.result({ timeoutMs }));
    expect(error.message).toContain('order A-17 is invalid');
    expect(error.causeName).toBe('NonRetryableError');
    expect(error.causeMessage).toBe('order A-17 is invalid');
    expect(error.causeStack).toContain('order A-17 is invalid');
    expect(error.causeStack).toMatch(/\n\s+at /);
    expect(error.runId).toBe(handle.id);
    expect(counts.get(`${handle.id}:run`)).toBe(1);

    const info = await t.client.get(handle.id);
    expect(info).toMatchObject({
      state: 'failed',
      attempts: 1,
      maxAttempts: 5,
      failures: 1,
      error: { name: 'NonRetryableError', message: 'order A-17 is invalid' },
    });
    expect(info!.finishedAt).toBeInstanceOf(Date);

    // Waiting again on the failed run reads the stored error.
    const again = await failure(t.client.wait(handle.id, { timeoutMs: 2_000 }));
    expect(again.causeName).toBe('NonRetryableError');
    expect(again.message).toContain('order A-17 is invalid');
  });

  it('a run that always throws fails after exactly `attempts` executions with the final error stored', async () => {
    const handle = await t.client.enqueue(AlwaysThrowsWorkflow, null);
    const error = await failure(handle.result({ timeoutMs }));
    expect(counts.get(`${handle.id}:run`)).toBe(3);
    expect(error.causeName).toBe('TypeError');
    expect(error.causeMessage).toBe('boom 3 on attempt 3');
    const info = (await t.client.get(handle.id))!;
    expect(info).toMatchObject({ state: 'failed', attempts: 3, maxAttempts: 3, failures: 3 });
    expect(info.error).toMatchObject({ name: 'TypeError', message: 'boom 3 on attempt 3' });
    expect(info.error!.stack).toContain('boom 3 on attempt 3');
  });

  it('the attempts option of an enqueue overrides the workflow', async () => {
    const handle = await t.client.enqueue(AlwaysThrowsWorkflow, null, { attempts: 2 });
    const error = await failure(handle.result({ timeoutMs }));
    expect(error.causeMessage).toBe('boom 2 on attempt 2');
    expect(counts.get(`${handle.id}:run`)).toBe(2);
    expect(await t.client.get(handle.id)).toMatchObject({ state: 'failed', attempts: 2, maxAttempts: 2 });
  });

  it('a step returning a WeakMap fails the run with PayloadNotSerializableError, without retries', async () => {
    const handle = await t.client.enqueue(UnkeepableWorkflow, { in: 'step' });
    const error = await failure(handle.result({ timeoutMs }));
    expect(error.causeName).toBe('PayloadNotSerializableError');
    expect(error.message).toContain('WeakMap');
    expect(error.message).toContain('big#1');
    expect(counts.get(`${handle.id}:run`)).toBe(1);
    expect(counts.get(`${handle.id}:big`)).toBe(1);
    expect(await stepMemo(handle.id)).toEqual({});
    expect(await t.client.get(handle.id)).toMatchObject({ state: 'failed', attempts: 1, failures: 1 });
  });

  it('a run result a payload cannot keep fails the run with PayloadNotSerializableError, without retries', async () => {
    const handle = await t.client.enqueue(UnkeepableWorkflow, { in: 'result' });
    const error = await failure(handle.result({ timeoutMs }));
    expect(error.causeName).toBe('PayloadNotSerializableError');
    expect(error.message).toContain('WeakMap');
    expect(counts.get(`${handle.id}:run`)).toBe(1);
  });

  it('ctx.attempt increments across retries', async () => {
    const handle = await t.client.enqueue(AttemptsWorkflow, { succeedOn: 3 });
    await expect(handle.result({ timeoutMs })).resolves.toEqual([1, 2, 3]);
    expect(await t.client.get(handle.id)).toMatchObject({ state: 'completed', attempts: 3, failures: 2 });
  });
});
