import 'reflect-metadata';
import { LeaseLostError, NonRetryableError, RunContext, SluiceError, Step, StepMemoLimitError } from '../../lib';
import { StepRecorder } from '../../lib/execution/step.recorder';
import { DEFAULT_MAX_MEMO_BYTES } from '../../lib/interfaces/payload.limits';
import { runScope } from '../../lib/workflow/run.scope';

const MAX_PAYLOAD = 1024 * 1024;

/** A persist function that stores writes in memory, as the token-checked Redis write would. */
function fakeStore(opts: { lease?: boolean } = {}) {
  const writes = new Map<string, string>();
  const persist = jest.fn(async (key: string, encoded: string) => {
    if (opts.lease === false) return false;
    writes.set(key, encoded);
    return true;
  });
  return { writes, persist };
}

/** The bytes one memo entry costs: key plus encoded result. */
const entry = (key: string, encoded: string) => Buffer.byteLength(key) + Buffer.byteLength(encoded);

describe('StepRecorder memo budget', () => {
  it('persists a step whose entry brings the memo exactly to the limit', async () => {
    const shipped = new Map([['a#1', '"xx"']]); // 3 + 4 bytes
    const { writes, persist } = fakeStore();
    const recorder = new StepRecorder('run-1', shipped, persist, MAX_PAYLOAD, 7 + entry('b#1', '"yy"'));
    await expect(recorder.step('b', () => 'yy')).resolves.toBe('yy');
    expect([...writes]).toEqual([['b#1', '"yy"']]);
  });

  it('counts the shipped memo in bytes, not characters, and refuses one byte over without writing', async () => {
    const shipped = new Map([['a#1', '"é"']]); // 3 + 4 bytes (é is 2 bytes in UTF-8)
    const { writes, persist } = fakeStore();
    const recorder = new StepRecorder('run-1', shipped, persist, MAX_PAYLOAD, 7 + entry('b#1', '"yy"') - 1);
    let executed = 0;
    const error = await recorder.step('b', () => (executed++, 'yy')).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StepMemoLimitError);
    expect(error).toMatchObject({ runId: 'run-1', stepKey: 'b#1', stepBytes: 7, bytes: 14, limit: 13 });
    expect((error as Error).message).toContain('"b#1"');
    expect((error as Error).message).toContain('14 bytes');
    expect((error as Error).message).toContain('limit of 13 bytes');
    expect(executed).toBe(1); // the size is only known once the step has run
    expect(persist).not.toHaveBeenCalled();
    expect(writes.size).toBe(0);
    expect(shipped.has('b#1')).toBe(false); // not in the memo either, so not replayed
  });

  it('is a NonRetryableError, so the executor fails the run for good', () => {
    const error = new StepMemoLimitError('r', 'k#1', 1, 2, 1);
    expect(error).toBeInstanceOf(NonRetryableError);
    expect(error).toBeInstanceOf(SluiceError);
    expect(error.name).toBe('StepMemoLimitError');
  });

  it('adds up the steps of one attempt, so a step in a loop hits the limit', async () => {
    const { writes, persist } = fakeStore();
    const perEntry = entry('loop#1', '"0123456789"');
    const recorder = new StepRecorder('run-1', new Map(), persist, MAX_PAYLOAD, perEntry * 3);
    const error = await (async () => {
      for (let i = 0; ; i++) await recorder.step('loop', () => '0123456789');
    })().catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StepMemoLimitError);
    expect(error).toMatchObject({ stepKey: 'loop#4', bytes: perEntry * 4, limit: perEntry * 3 });
    expect([...writes.keys()]).toEqual(['loop#1', 'loop#2', 'loop#3']);
  });

  it('reserves the bytes of a write in flight, so parallel steps cannot together overshoot', async () => {
    const { writes, persist } = fakeStore();
    const recorder = new StepRecorder('run-1', new Map(), persist, MAX_PAYLOAD, entry('p#1', '"aaaa"') + 1);
    const results = await Promise.allSettled([recorder.step('p', () => 'aaaa'), recorder.step('p', () => 'bbbb')]);

    expect(results[0]).toEqual({ status: 'fulfilled', value: 'aaaa' });
    expect(results[1]).toMatchObject({ status: 'rejected', reason: expect.any(StepMemoLimitError) });
    expect([...writes.keys()]).toEqual(['p#1']);
  });

  it('gives the budget back when the lease is lost, since nothing was written', async () => {
    const limit = entry('s#1', '"abc"');
    const lost = fakeStore({ lease: false });
    const recorder = new StepRecorder('run-1', new Map(), lost.persist, MAX_PAYLOAD, limit);
    await expect(recorder.step('s', () => 'abc')).rejects.toBeInstanceOf(LeaseLostError);
    // Same-size entry for the next occurrence: refused only by the lease, not by the budget.
    await expect(recorder.step('t', () => 'abc')).rejects.toBeInstanceOf(LeaseLostError);
  });

  it('replays a memo already over the budget (e.g. after the limit was lowered); only new steps are refused', async () => {
    const shipped = new Map([['big#1', JSON.stringify('x'.repeat(100))]]);
    const { persist } = fakeStore();
    const recorder = new StepRecorder('run-1', shipped, persist, MAX_PAYLOAD, 10);
    await expect(recorder.step('big', () => 'never')).resolves.toBe('x'.repeat(100));
    await expect(recorder.step('next', () => 1)).rejects.toBeInstanceOf(StepMemoLimitError);
  });

  it('defaults to DEFAULT_MAX_MEMO_BYTES (16 MiB) when no budget is given', async () => {
    expect(DEFAULT_MAX_MEMO_BYTES).toBe(16 * 1024 * 1024);
    const nearlyFull = DEFAULT_MAX_MEMO_BYTES - entry('fill#1', '""') - 10;
    const shipped = new Map([['fill#1', JSON.stringify('x'.repeat(nearlyFull))]]);
    const { persist } = fakeStore();
    const recorder = new StepRecorder('run-1', shipped, persist, MAX_PAYLOAD);
    await expect(recorder.step('a', () => 1)).resolves.toBe(1); // a#1 + 1: 4 bytes
    const error = await recorder.step('b', () => 'more').catch((e: unknown) => e);
    expect(error).toMatchObject({ stepKey: 'b#1', limit: DEFAULT_MAX_MEMO_BYTES });
  });
});

/** A `@Step` that uses `ctx.step` inside it, and a context wired to the recorder as the executor does. */
class Checkout {
  executed: string[] = [];

  @Step() async reserve(ctx: RunContext): Promise<string> {
    this.executed.push('reserve');
    const at = await ctx.step('stamp', () => (this.executed.push('stamp:nested'), new Date(0)));
    // The nested call ran plainly: its raw value, not a JSON round-tripped copy (although the
    // type says string: ctx.step is typed as the round trip, which is what a top-level call gives).
    return `reserved@${(at as unknown) instanceof Date ? 'Date' : typeof at}`;
  }
}

function runWith(recorder: StepRecorder, body: (ctx: RunContext) => Promise<unknown>): Promise<unknown> {
  const ctx = { runId: 'run-1', attempt: 1, signal: new AbortController().signal, step: recorder.step.bind(recorder) } as RunContext;
  return runScope.run(recorder, () => body(ctx));
}

describe('StepRecorder nesting', () => {
  it('runs ctx.step inside a @Step plainly: no memo entry or occurrence of its own', async () => {
    const checkout = new Checkout();
    const first = fakeStore();
    const body = async (ctx: RunContext) => [
      await checkout.reserve(ctx),
      await ctx.step('stamp', () => (checkout.executed.push('stamp:top'), 'top')),
    ];

    await expect(runWith(new StepRecorder('run-1', new Map(), first.persist, MAX_PAYLOAD), body)).resolves.toEqual([
      'reserved@Date',
      'top',
    ]);
    expect(checkout.executed).toEqual(['reserve', 'stamp:nested', 'stamp:top']);
    expect([...first.writes]).toEqual([
      ['reserve#1', '"reserved@Date"'],
      ['stamp#1', '"top"'], // the top-level call is the first `stamp`
    ]);

    // The retry replays both from the memo: neither the parent nor its nested call executes.
    const retry = fakeStore();
    await expect(runWith(new StepRecorder('run-1', new Map(first.writes), retry.persist, MAX_PAYLOAD), body)).resolves.toEqual([
      'reserved@Date',
      'top',
    ]);
    expect(checkout.executed).toEqual(['reserve', 'stamp:nested', 'stamp:top']);
    expect(retry.persist).not.toHaveBeenCalled();
  });

  it('keeps steps started in parallel at the top level as separate memoized steps', async () => {
    const { writes, persist } = fakeStore();
    const recorder = new StepRecorder('run-1', new Map(), persist, MAX_PAYLOAD);
    const slow = (value: string) => new Promise<string>((resolve) => setTimeout(() => resolve(value), 5));
    await runWith(recorder, (ctx) => Promise.all([ctx.step('fetch', () => slow('a')), ctx.step('fetch', () => 'b')]));
    expect(Object.fromEntries(writes)).toEqual({ 'fetch#1': '"a"', 'fetch#2': '"b"' });
  });
});
