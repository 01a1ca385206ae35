import type Redis from 'ioredis';
import { RunContext, Workflow } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter, Gates, pollUntil } from '../support/workflows';

/**
 * Re-driving a parent its child failed (issue 27, item 5): a child's failure the parent does not
 * catch fails the parent for good (its attempts would only replay it from the memo), and once the
 * child is fixed and retried, retrying the parent waits for the child again and takes its new
 * result instead of replaying the old failure.
 */
const effects = new Counter();
const holds = new Gates();
/** The "bugs" fixed so far: a child fails while its input's bug is not in here. */
const fixed = new Set<string>();

interface ChildInput {
  n: number;
  bug?: string;
  hold?: string;
}

@Workflow('wcr.child', { attempts: 1 })
class Child {
  async run(input: ChildInput, ctx: RunContext) {
    // Each execution of the child has its own gate: `<hold>:1`, `<hold>:2`…
    const execution = effects.inc(`child:${ctx.runId}`);
    if (input.hold) await holds.get(`${input.hold}:${execution}`).promise;
    if (input.bug && !fixed.has(input.bug)) throw new Error(`bug ${input.bug}`);
    return input.n * 2;
  }
}

@Workflow('wcr.parent', { attempts: 3, backoff: { delayMs: 10 } })
class Parent {
  async run(input: { children: ChildInput[] }, ctx: RunContext) {
    effects.inc(`parent:${ctx.runId}`);
    await ctx.step('before', () => effects.inc(`before:${ctx.runId}`));
    const doubled = await ctx.invokeAll<number>(input.children.map((child) => ({ workflow: Child, input: child })));
    return { doubled };
  }
}

describe('durable waits: re-driving a parent its child failed', () => {
  const ns = uniqueNamespace('wcr');
  let redis: Redis;
  let worker: TestApp;
  let producer: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    worker = await createApp([Child, Parent], { namespace: ns, worker: { concurrency: 8 } });
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
  });
  afterAll(async () => {
    holds.openAll();
    await worker.close();
    await producer.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const get = (id: string) => producer.client.get(id);
  const inState = (id: string, state: string) =>
    pollUntil(
      () => get(id),
      (run) => run?.state === state,
      `${id} ${state}`,
    );
  const childOf = (parent: string, n = 1) => `${parent}/invoke:wcr.child#${n}`;

  it('a child failure the parent does not catch fails it for good: no attempt is spent replaying it', async () => {
    const parent = await producer.client.enqueue('wcr.parent', { children: [{ n: 1, bug: 'a' }] });
    await expect(parent.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ causeName: 'ChildWorkflowFailedError' });
    // One failure of its 3 attempts; claimed twice (the first attempt, and its resume when the child failed).
    expect(await get(parent.id)).toMatchObject({
      state: 'failed',
      failures: 1,
      maxAttempts: 3,
      error: expect.objectContaining({ name: 'ChildWorkflowFailedError' }),
    });
    expect(effects.get(`parent:${parent.id}`)).toBe(2);
    expect(effects.get(`child:${childOf(parent.id)}`)).toBe(1);
  });

  it("child fixed and retried, then the parent retried: the parent completes with the child's new result", async () => {
    const parent = await producer.client.enqueue('wcr.parent', { children: [{ n: 21, bug: 'b' }] });
    await expect(parent.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ causeName: 'ChildWorkflowFailedError' });
    const child = childOf(parent.id);
    expect(await get(child)).toMatchObject({ state: 'failed' });

    fixed.add('b');
    expect(await producer.client.retry(child)).toEqual({ id: child, previousState: 'failed' });
    expect(await producer.client.wait(child, { timeoutMs: 10_000 })).toBe(42);
    expect(await producer.client.retry(parent.id)).toEqual({ id: parent.id, previousState: 'failed' });
    expect(await producer.client.wait(parent.id, { timeoutMs: 10_000 })).toEqual({ doubled: [42] });

    // The child ran twice (failed, then fixed), never a third time; the step before it once.
    expect(effects.get(`child:${child}`)).toBe(2);
    expect(effects.get(`before:${parent.id}`)).toBe(1);
    expect(await get(parent.id)).toMatchObject({ state: 'completed', failures: 0 });
  });

  it('the parent retried while its retried child still runs waits for it; a completed sibling is not run again', async () => {
    const parent = await producer.client.enqueue('wcr.parent', { children: [{ n: 1 }, { n: 5, bug: 'c', hold: 'c' }] });
    const failing = childOf(parent.id, 2);
    await inState(failing, 'active');
    holds.open('c:1');
    await expect(parent.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ causeName: 'ChildWorkflowFailedError' });

    fixed.add('c');
    await producer.client.retry(failing);
    await inState(failing, 'active');
    await producer.client.retry(parent.id);
    // The child's second execution holds: the parent waits for it again.
    await inState(parent.id, 'waiting-child');
    holds.open('c:2');
    expect(await producer.client.wait(parent.id, { timeoutMs: 10_000 })).toEqual({ doubled: [2, 10] });
    expect(effects.get(`child:${childOf(parent.id, 1)}`)).toBe(1);
    expect(effects.get(`child:${failing}`)).toBe(2);
  });

  it('the parent retried before its child: fails again at once (one attempt), and is re-driven once the child is', async () => {
    const parent = await producer.client.enqueue('wcr.parent', { children: [{ n: 4, bug: 'd' }] });
    await expect(parent.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ causeName: 'ChildWorkflowFailedError' });
    const child = childOf(parent.id);

    await producer.client.retry(parent.id);
    await expect(producer.client.wait(parent.id, { timeoutMs: 10_000 })).rejects.toMatchObject({ causeName: 'ChildWorkflowFailedError' });
    expect(await get(parent.id)).toMatchObject({ state: 'failed', failures: 1 });
    expect(effects.get(`child:${child}`)).toBe(1);

    fixed.add('d');
    await producer.client.retry(child);
    expect(await producer.client.wait(child, { timeoutMs: 10_000 })).toBe(8);
    await producer.client.retry(parent.id);
    expect(await producer.client.wait(parent.id, { timeoutMs: 10_000 })).toEqual({ doubled: [8] });
  });

  it('the namespace is consistent at rest', async () => {
    holds.openAll();
    expectConsistent(await auditNamespace(redis, { namespace: ns }));
  });
});
