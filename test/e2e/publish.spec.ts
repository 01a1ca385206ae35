import type Redis from 'ioredis';
import { RunContext, SluiceError, Workflow } from '../../lib';
import { randomUUID } from 'node:crypto';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { channelSubscribers, listenToChannels, publishOn } from '../support/pubsub';
import { Gates, pollUntil } from '../support/workflows';
import { SluiceServices } from '../../lib/sluice.services';

const gates = new Gates();

@Workflow('publish.gate')
class GateWorkflow {
  async run(input: { key: string }, _ctx: RunContext): Promise<string> {
    await gates.get(input.key).promise;
    return `opened ${input.key}`;
  }
}

/** The done channel is a doorbell for waiters: a run nobody waits on costs no publish. */
describe('done-channel announcements', () => {
  let t: TestApp;
  let namespace: string;
  let redis: Redis;
  const done = (id: string) => `{sluice:${namespace}}:done:${id}`;

  /**
   * Hears the namespace's done channels (a pattern; on a cluster, sharded, those of `ids`: see
   * listenToChannels) until `heard` publishes a sentinel of ours after the runs' ends, so every
   * earlier announcement has arrived; the ids announced, the sentinel's left out.
   */
  async function listen(ids: string[]): Promise<{ heard(): Promise<string[]> }> {
    const listener = await listenToChannels(redis, done('*'), [...ids, 'sentinel'].map(done));
    const announced = () => listener.heard.map((channel) => channel.slice(channel.lastIndexOf(':') + 1));
    return {
      async heard() {
        await publishOn(redis, done('sentinel'), 'x');
        await pollUntil(async () => announced().includes('sentinel'), Boolean, 'the sentinel');
        await listener.close();
        return announced().filter((id) => id !== 'sentinel');
      },
    };
  }

  beforeAll(async () => {
    namespace = uniqueNamespace('publish');
    t = await createApp([GateWorkflow], { namespace });
    redis = rawRedis();
  });
  afterAll(async () => {
    gates.openAll();
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('is skipped for a run nobody waits on, and sent once wait() is called, even mid-run', async () => {
    const quiet = await t.client.enqueue(GateWorkflow, { key: 'quiet' });
    const watched = await t.client.enqueue(GateWorkflow, { key: 'watched' });
    const listener = await listen([quiet.id, watched.id]); // both are held at their gates: nothing published yet
    await pollUntil(
      async () => (await t.client.stats()).workflows['publish.gate']?.active ?? 0,
      (n) => n === 2,
      'both runs active',
    );
    const result = watched.result({ timeoutMs: 5_000 }); // wait() starts while the run is active
    await pollUntil(
      () => redis.hget(`{sluice:${namespace}}:run:${watched.id}`, 'waited'),
      (flag) => flag === '1',
      'the waiter to register',
    );
    gates.open('quiet');
    gates.open('watched');
    await expect(result).resolves.toBe('opened watched');
    await pollUntil(
      async () => (await t.client.get(quiet.id))?.state,
      (state) => state === 'completed',
      'the quiet run to complete',
    );
    // The sentinel: a publish of ours after both completions, so every earlier one has arrived.
    expect(await listener.heard()).toEqual([watched.id]);
  });

  it("is sent for run(), which asks for it at enqueue: on the run's channel while the process's inbox is not subscribed yet, then on the inbox", async () => {
    // The caller is an app of its own: a worker tells its own app's waits itself (LocalWaits).
    const caller = await createApp([], { namespace, worker: { enabled: false } });
    try {
      await runTwice(caller);
    } finally {
      await caller.close();
    }
  });

  async function runTwice(caller: TestApp): Promise<void> {
    const first = randomUUID();
    const second = randomUUID();
    const inbox = caller.app.get(SluiceServices).waiter.inboxChannel;
    const listener = await listen([first, second]);
    gates.open('run');
    // The app's first run(): its inbox is not live yet (that call subscribes it), so the done channel.
    await expect(caller.client.run('publish.gate', { key: 'run' }, { id: first, timeoutMs: 5_000 })).resolves.toBe('opened run');
    await pollUntil(
      () => channelSubscribers(redis, inbox),
      (n) => n === 1,
      'the inbox subscribed',
    );
    const inboxListener = await listenToChannels(redis, inbox, [inbox]);
    await expect(caller.client.run('publish.gate', { key: 'run' }, { id: second, timeoutMs: 5_000 })).resolves.toBe('opened run');
    expect(await listener.heard()).toEqual([first]); // the second run's end went to the inbox only
    await inboxListener.close();
    expect(inboxListener.heard).toEqual([inbox]);
  }
});

describe('after shutdown', () => {
  it('rejects new waits and runs with a SluiceError instead of reopening connections', async () => {
    const closed = await createApp([GateWorkflow], { namespace: uniqueNamespace('closed'), worker: { enabled: false } });
    await closed.close();
    await expect(closed.client.wait('some-run')).rejects.toBeInstanceOf(SluiceError);
    await expect(closed.client.run(GateWorkflow, { key: 'late' })).rejects.toBeInstanceOf(SluiceError);
    await expect(closed.client.enqueue(GateWorkflow, { key: 'late' })).rejects.toThrow(/shut down/);
  });
});
