import type Redis from 'ioredis';
import { Workflow } from '../../lib';
import { LOCAL_WAITS_MIN_TTL_MS } from '../../lib/worker/run.commits';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { channelSubscribers } from '../support/pubsub';
import { monitorCommands, pollUntil } from '../support/workflows';
import { SluiceServices } from '../../lib/sluice.services';

/**
 * A worker tells its own app's run() waits of the runs it completes, from the complete call's
 * reply (lib/interfaces/local.waits.ts), and the call names the app's inbox so that Redis does not
 * announce them there as well. Other apps' waits (another process, as far as Redis can tell) are
 * announced as before; so are runs kept less than LOCAL_WAITS_MIN_TTL_MS. Likewise the enqueue
 * names the app's worker, and a run handed to it starts from the enqueue's reply, with nothing
 * published on its handoff channel (lib/interfaces/local.worker.ts); a worker of another app is
 * handed its runs over that channel.
 */
@Workflow('local.echo')
class EchoWorkflow {
  run(input: { value: number }): { doubled: number; at: Date } {
    return { doubled: input.value * 2, at: new Date(Date.UTC(2026, 0, input.value)) };
  }
}

@Workflow('local.nothing')
class NothingWorkflow {
  run(): undefined {
    return undefined;
  }
}

const RUNS = 5;
const expected = (value: number) => ({ doubled: value * 2, at: new Date(Date.UTC(2026, 0, value)) });

describe("run() and a worker in the caller's own app", () => {
  let redis: Redis;
  const apps: TestApp[] = [];
  const namespaces: string[] = [];

  beforeAll(() => void (redis = rawRedis()));
  afterEach(async () => void (await Promise.all(apps.splice(0).map((app) => app.close()))));
  afterAll(async () => {
    for (const namespace of namespaces) await dropNamespace(redis, namespace);
    await redis.quit();
  });

  /**
   * A caller app (its inbox subscribed) and the app whose worker runs its runs: the same app, or
   * (`apart`) another one.
   */
  async function open(options: { apart?: boolean; resultTtlMs?: number } = {}) {
    const namespace = uniqueNamespace('local');
    namespaces.push(namespace);
    const workflows = [EchoWorkflow, NothingWorkflow];
    const settings = { namespace, ...(options.resultTtlMs && { defaults: { resultTtlMs: options.resultTtlMs } }) };
    if (options.apart) apps.push(await createApp(workflows, settings));
    const caller = await createApp(workflows, { ...settings, ...(options.apart && { worker: { enabled: false } }) });
    apps.push(caller);
    const inbox = caller.app.get(SluiceServices).waiter.inboxChannel;
    // The first run() waits on its run's done channel and subscribes the inbox for the next ones.
    expect(await caller.client.run(EchoWorkflow, { value: 1 })).toEqual(expected(1));
    await pollUntil(
      () => channelSubscribers(redis, inbox),
      (n) => n === 1,
      'the inbox subscribed',
    );
    return { caller, namespace, inbox };
  }

  /**
   * Runs RUNS run()s (and one of a run that returns nothing); resolves their results, how many
   * announcements Redis published on `inbox` meanwhile, how many handoffs it published, and how
   * many records the waits read.
   */
  async function roundTrips(caller: TestApp, namespace: string, inbox: string) {
    const monitor = await monitorCommands(namespace);
    try {
      const results: unknown[] = [];
      for (let value = 2; value < 2 + RUNS; value++) results.push(await caller.client.run(EchoWorkflow, { value }));
      results.push(await caller.client.run(NothingWorkflow, {}));
      const sentinel = `${inbox}:sentinel`;
      await redis.exists(sentinel); // a command of ours behind theirs
      let announced = 0;
      let handoffs = 0;
      let reads = 0;
      for (;;) {
        const args = await monitor.next(() => true);
        if (args[0] === 'exists' && args[1] === sentinel) break;
        if (args[0] === 'publish' && args[1] === inbox) announced++;
        if (args[0] === 'publish' && args[1].startsWith(`{sluice:${namespace}}:handoff:`)) handoffs++;
        // A wait that heard nothing reads the record (after INBOX_FIRST_READ_MS): watch.lua. Only
        // this namespace's: MONITOR sees the calls of the test files running beside this one too.
        if (args[0] === 'fcall' && args[1].endsWith('_watch') && args[3]?.startsWith(`{sluice:${namespace}}`)) reads++;
      }
      return { results, announced, handoffs, reads };
    } finally {
      await monitor.close();
    }
  }

  const results = [...Array.from({ length: RUNS }, (_, i) => expected(i + 2)), undefined];

  it('is told by the worker: Redis announces nothing on the inbox nor hands off on a channel, and the results are what an announcement carries', async () => {
    const { caller, namespace, inbox } = await open();
    await expect(roundTrips(caller, namespace, inbox)).resolves.toEqual({ results, announced: 0, handoffs: 0, reads: 0 });
  });

  it("is announced on the inbox when the worker is another app's", async () => {
    const { caller, namespace, inbox } = await open({ apart: true });
    await expect(roundTrips(caller, namespace, inbox)).resolves.toEqual({ results, announced: RUNS + 1, handoffs: RUNS + 1, reads: 0 });
  });

  it(`is announced on the inbox too when results are kept less than ${LOCAL_WAITS_MIN_TTL_MS} ms (a lost reply's re-read must find them)`, async () => {
    const { caller, namespace, inbox } = await open({ resultTtlMs: LOCAL_WAITS_MIN_TTL_MS - 1 });
    await expect(roundTrips(caller, namespace, inbox)).resolves.toEqual({ results, announced: RUNS + 1, handoffs: 0, reads: 0 });
  });
});
