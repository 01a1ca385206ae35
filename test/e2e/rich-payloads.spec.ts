import { RunContext, Workflow } from '../../lib';
import { createDashboardApp, type DashboardApp } from '../support/dashboard-app';
import { uniqueNamespace } from '../support/app';

/** The example result, made fresh per call (so equality, not identity, is what is checked). */
function richValue() {
  return { at: new Date(Date.UTC(2026, 11, 6, 12)), tags: new Set(['a']), n: 10n, m: new Map([[1, 'x']]) };
}

/** Every kind a payload keeps besides plain JSON. */
function everyKind() {
  return {
    ...richValue(),
    missing: undefined,
    list: [undefined, NaN, Infinity, -Infinity],
    url: new URL('https://example.com/a?b=1'),
    pattern: /a+b/gi,
    bytes: new Uint8Array([1, 2, 255]),
    floats: new Float64Array([1.5, -2]),
    buffer: Buffer.from('hi'),
    nested: new Map<string, unknown>([['when', new Set([new Date(0)])]]),
  };
}

/** What each attempt of the parent saw, by attempt: the types as the code meets them. */
const seen: { step: unknown; child: unknown; signal: unknown; input: unknown }[] = [];

@Workflow('rich.child')
class RichChild {
  async run(input: { since: Date }) {
    return { ...richValue(), since: input.since };
  }
}

@Workflow('rich.parent', { attempts: 2, backoff: { delayMs: 0 } })
class RichParent {
  async run(input: { since: Date; ids: Set<string> }, ctx: RunContext) {
    const step = await ctx.step('make', () => everyKind());
    const child = await ctx.invoke(RichChild, { since: input.since });
    const signal = await ctx.waitForSignal<{ at: Date; n: bigint }>('go');
    seen.push({ step, child, signal, input });
    // The first attempt to get here fails: the retry replays the step, the child and the signal from the memo.
    if (seen.length === 1) throw new Error('fail once, to replay');
    return richValue();
  }
}

describe('rich payloads (Date, Map, Set, BigInt, undefined, NaN, URL, RegExp, typed arrays)', () => {
  let dash: DashboardApp;
  beforeAll(async () => {
    dash = await createDashboardApp('express', [RichChild, RichParent], { namespace: uniqueNamespace('rich') }, { path: '/sluice' });
  });
  afterAll(() => dash.close());

  it('come back as they were from run(), wait(), get(), a step replay, a child and a signal, and read well on the dashboard', async () => {
    const since = new Date(Date.UTC(2026, 0, 1));
    const handle = await dash.client.enqueue(RichParent, { since, ids: new Set(['o-1', 'o-2']) });
    const running = dash.client.run(RichChild, { since }, { timeoutMs: 10_000 });
    expect(await running).toEqual({ ...richValue(), since });

    // The signal may arrive before the parent waits: it is kept in the mailbox.
    await dash.client.signal(handle.id, 'go', { at: since, n: 2n ** 70n });
    const result = await dash.client.wait(handle.id, { timeoutMs: 10_000 });
    expect(result).toEqual(richValue());
    expect((result as ReturnType<typeof richValue>).m).toBeInstanceOf(Map);

    const info = await dash.client.get(handle.id);
    expect(info?.state).toBe('completed');
    expect(info?.result).toEqual(richValue());
    expect(info?.input).toEqual({ since, ids: new Set(['o-1', 'o-2']) });

    // ctx.attempt counts claims (each wait's resume is one): the two that got past the signal.
    expect(seen).toHaveLength(2);
    for (const attempt of seen) {
      expect(attempt.input).toEqual({ since, ids: new Set(['o-1', 'o-2']) });
      expect(attempt.step).toEqual(everyKind());
      const step = attempt.step as ReturnType<typeof everyKind>;
      expect('missing' in step).toBe(true);
      expect(Buffer.isBuffer(step.buffer)).toBe(true);
      expect(step.pattern.flags).toBe('gi');
      expect(attempt.child).toEqual({ ...richValue(), since });
      expect(attempt.signal).toEqual({ timedOut: false, payload: { at: since, n: 2n ** 70n } });
    }

    const page = (await (await fetch(`${dash.origin}/sluice/api/runs/${handle.id}`)).json()) as {
      run: { shown?: { result?: string; input?: string }; result?: unknown };
    };
    expect(page.run.result).toBeUndefined();
    expect(page.run.shown?.result).toContain("tags: Set(1) { 'a' }");
    expect(page.run.shown?.result).toContain('n: 10n');
    expect(page.run.shown?.result).toContain("m: Map(1) { 1 => 'x' }");
    expect(page.run.shown?.result).toContain('at: 2026-12-06T12:00:00.000Z');
    expect(page.run.shown?.input).toContain("ids: Set(2) { 'o-1', 'o-2' }");

    const list = (await (await fetch(`${dash.origin}/sluice/api/runs?id=${handle.id}`)).json()) as {
      runs: { id: string; input: string }[];
    };
    expect(list.runs.find((r) => r.id === handle.id)?.input).toContain("Set(2) { 'o-1', 'o-2' }");
  });

  it('a payload JSON keeps exactly is sent to the dashboard as JSON', async () => {
    const handle = await dash.client.enqueue('rich.child', { since: '2026-01-01' });
    await dash.client.wait(handle.id, { timeoutMs: 10_000 });
    const page = (await (await fetch(`${dash.origin}/sluice/api/runs/${handle.id}`)).json()) as {
      run: { input: unknown; shown?: Record<string, string> };
    };
    expect(page.run.input).toEqual({ since: '2026-01-01' });
    expect(Object.keys(page.run.shown ?? {})).toEqual(['result']);
  });
});
