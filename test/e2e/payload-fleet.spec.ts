import type { ChildProcess } from 'node:child_process';
import { RunContext, Workflow, WorkflowFailedError } from '../../lib';
import { createApp, redisUrl, type TestApp, uniqueNamespace } from '../support/app';
import { forkPreviousRelease, nextMessage, PREVIOUS_RELEASE } from '../support/previous-release';

jest.setTimeout(90_000);

/** The same workflow in this release (test/fixtures/previous-release/fleet-app.ts has the old one). */
@Workflow('fleet.echo', { attempts: 1 })
class FleetEcho {
  async run(input: { at: unknown }, ctx: RunContext) {
    const stamp = await ctx.step('stamp', () => ({ at: new Date(Date.UTC(2026, 0, 2)), seen: typeof input.at }));
    return { input, stamp };
  }
}

/**
 * A rolling deploy: the previous release (a real process running that release's code, see
 * test/support/previous-release.ts) and this one on one namespace. Plain-JSON payloads pass both
 * ways; a rich payload reaches an old worker as a clear failure, never as misread data.
 */
describe(`a mixed fleet with the previous release (${PREVIOUS_RELEASE})`, () => {
  const namespace = uniqueNamespace('fleet');
  let old: ChildProcess;
  let producer: TestApp;
  let firstRunId: string;

  beforeAll(async () => {
    // This release only produces until the old worker has had its turn: runs go to the old one.
    producer = await createApp([], { namespace, worker: { enabled: false } });
    old = forkPreviousRelease('fleet-app.ts', [namespace, redisUrl()]);
    firstRunId = (await nextMessage<{ ready?: string }>(old, (m) => m.ready !== undefined, 60_000)).ready as string;
  });
  afterAll(async () => {
    if (old?.exitCode === null) {
      const exited = new Promise((done) => old.once('exit', done));
      old.send({ stop: true });
      await exited;
    }
    await producer?.close();
  });

  async function enqueueOnOld(input: unknown): Promise<string> {
    const reply = nextMessage<{ enqueued?: string }>(old, (m) => m.enqueued !== undefined);
    old.send({ enqueue: input });
    return (await reply).enqueued as string;
  }

  it('reads what the previous release wrote: input, step memo and result (its Dates were strings)', async () => {
    const result = await producer.client.wait(firstRunId, { timeoutMs: 20_000 });
    expect(result).toEqual({ input: { at: '2026-01-01T00:00:00.000Z' }, stamp: { at: '2026-01-02T00:00:00.000Z', seen: 'string' } });
    const info = await producer.client.get(firstRunId);
    expect(info).toMatchObject({ state: 'completed', input: { at: '2026-01-01T00:00:00.000Z' } });
    const relayed = await enqueueOnOld({ at: 'from the old producer' });
    expect(await producer.client.wait(relayed, { timeoutMs: 20_000 })).toMatchObject({ stamp: { seen: 'string' } });
  });

  it("gives the previous release's worker a plain-JSON input this release wrote, which it runs", async () => {
    const handle = await producer.client.enqueue('fleet.echo', { at: 'plain' });
    expect(await handle.result({ timeoutMs: 20_000 })).toMatchObject({ input: { at: 'plain' }, stamp: { seen: 'string' } });
  });

  it("runs a debounced run on the previous release's worker: it ignores the dedupe fields and runs the last input", async () => {
    const dedupe = { key: `fleet-${namespace}`, ttlMs: 200, mode: 'debounce' as const };
    const first = await producer.client.enqueue('fleet.echo', { at: 'first' }, { dedupe });
    const last = await producer.client.enqueue('fleet.echo', { at: 'last' }, { dedupe });
    expect(last).toMatchObject({ id: first.id, dedupe: { outcome: 'replaced', seq: 2 } });
    expect(await first.result({ timeoutMs: 20_000 })).toMatchObject({ input: { at: 'last' } });
    expect(await producer.client.get(first.id)).toMatchObject({ state: 'completed', dedupe: { count: 2, inputSeq: 2 } });
  });

  it("fails a rich input on the previous release's worker with a clear error, and this release's worker runs it on retry", async () => {
    const at = new Date(Date.UTC(2026, 5, 1));
    const handle = await producer.client.enqueue('fleet.echo', { at });
    const failure = await handle.result({ timeoutMs: 20_000 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect((failure as WorkflowFailedError).message).toMatch(/Unexpected token '~', "~rich1~\[.*is not valid JSON/);

    // The deploy finishes: the old worker stops, a worker of this release re-drives the run.
    const exited = new Promise((done) => old.once('exit', done));
    old.send({ stop: true });
    await exited;
    const worker = await createApp([FleetEcho], { namespace });
    try {
      await producer.client.retry(handle.id);
      expect(await producer.client.wait(handle.id, { timeoutMs: 20_000 })).toEqual({
        input: { at },
        stamp: { at: new Date(Date.UTC(2026, 0, 2)), seen: 'object' },
      });
    } finally {
      await worker.close();
    }
  });
});
