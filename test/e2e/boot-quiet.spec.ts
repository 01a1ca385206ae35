import type Redis from 'ioredis';
import { RunCancelledError, RunContext, Workflow } from '../../lib';
import { BOOT_QUIET_MAX_MS } from '../../lib/worker/boot.quiet';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { connectionNamesWhen } from '../support/client-list';
import { within } from '../support/flow';
import { commandsBefore, deferred, Deferred, Gates, monitorCommands } from '../support/workflows';

/**
 * A worker's boot opens only its command connection: the subscriber and the blocking connection,
 * needed only while it idles, open once the runs its first reserve claimed are done, or a bounded
 * while after it (BootQuiet). What that must not cost: a run enqueued meanwhile still starts, and
 * a cancel published before the subscriber listened still reaches the run (the heartbeat beat at
 * its subscription), long before the periodic beat.
 */
const gates = new Gates();
const started = new Gates();
const aborted = new Map<string, Deferred<unknown>>();
const abortedOf = (id: string) => aborted.get(id) ?? (aborted.set(id, deferred()), aborted.get(id)!);

@Workflow('bq.hold', { attempts: 1 })
class Hold {
  async run(input: { key: string }, ctx: RunContext) {
    ctx.signal.addEventListener('abort', () => abortedOf(ctx.runId).resolve(ctx.signal.reason));
    started.open(ctx.runId);
    await gates.get(input.key).promise;
    return input.key;
  }
}

describe('a worker boot that claims runs', () => {
  let redis: Redis;
  const apps: TestApp[] = [];
  const namespaces: string[] = [];
  const open = async (namespace: string, worker: boolean) => {
    const app = await createApp(worker ? [Hold] : [], {
      namespace,
      // A periodic lease beat 20 s away: a cancel heard sooner came by the channel or the subscription's beat.
      worker: worker ? { concurrency: 4, lockMs: 60_000 } : { enabled: false },
    });
    apps.push(app);
    return app;
  };
  const fresh = (label: string) => {
    const namespace = uniqueNamespace(label);
    namespaces.push(namespace);
    return namespace;
  };

  beforeAll(() => {
    redis = rawRedis();
  });
  afterAll(async () => {
    gates.openAll();
    for (const app of apps) await app.close();
    for (const namespace of namespaces) await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('commits them before it opens its subscriber and blocking connections', async () => {
    const ns = fresh('bq-order');
    const producer = await open(ns, false);
    const handle = await producer.client.enqueue(Hold, { key: 'short' });
    gates.open('short');
    const monitor = await monitorCommands(ns);
    try {
      await open(ns, true);
      // The idle-time connections do open (no run left), each named in its first write.
      await connectionNamesWhen(redis, ns, (names) => names.includes(`sluice:${ns}:blocking`) && names.includes(`sluice:${ns}:subscriber`));
      const seen = await commandsBefore(monitor, redis, `{sluice:${ns}}:sentinel`);
      const at = (what: string, match: (args: string[]) => boolean) => {
        const index = seen.findIndex(match);
        if (index < 0) throw new Error(`no ${what} in ${seen.length} commands`);
        return index;
      };
      const named = (role: string) => (args: string[]) => args[0] === 'client' && args[2] === `sluice:${ns}:${role}`;
      const reserve = at('boot reserve', (args) => args[0] === 'fcall' && args[1].includes('reserve_at_layout'));
      const complete = at('complete', (args) => args[0] === 'fcall' && args[1].endsWith('_complete') && args.includes(handle.id));
      expect(reserve).toBeLessThan(complete);
      // Each opens once the claimed run is committed, or, if committing it took longer than that
      // (a loaded machine), no sooner than BOOT_QUIET_MAX_MS after the reserve: never before both.
      for (const role of ['subscriber', 'blocking']) {
        const opened = at(role, named(role));
        if (opened < complete) expect(seen[opened].atMs! - seen[reserve].atMs!).toBeGreaterThanOrEqual(BOOT_QUIET_MAX_MS - 2); // timer rounding
      }
      expect(at('subscriber', named('subscriber'))).toBeGreaterThan(reserve);
    } finally {
      await monitor.close();
    }
    expect(await producer.client.wait(handle.id)).toBe('short');
  });

  it('still takes runs enqueued while they run, and opens the idle-time connections while they still do', async () => {
    const ns = fresh('bq-live');
    const producer = await open(ns, false);
    const first = await producer.client.enqueue(Hold, { key: 'long-1' });
    await open(ns, true);
    await started.get(first.id).promise;
    const second = await producer.client.enqueue(Hold, { key: 'long-2' });
    // The first run is held: only the bound ends the boot's quiet, and the worker then claims the second.
    await within(started.get(second.id).promise, 5_000, 'the run enqueued during the boot started');
    const names = await connectionNamesWhen(
      redis,
      ns,
      (all) => all.includes(`sluice:${ns}:blocking`) && all.includes(`sluice:${ns}:subscriber`),
    );
    expect(names).toEqual(expect.arrayContaining([`sluice:${ns}:blocking`, `sluice:${ns}:subscriber`]));
    gates.open('long-1');
    gates.open('long-2');
    expect(await producer.client.wait(first.id)).toBe('long-1');
    expect(await producer.client.wait(second.id)).toBe('long-2');
  });

  it('hears a cancel published before its subscriber listened at the subscription, not at the next periodic beat', async () => {
    const ns = fresh('bq-cancel');
    const producer = await open(ns, false);
    const handle = await producer.client.enqueue(Hold, { key: 'cancelled' });
    await open(ns, true);
    await started.get(handle.id).promise;
    // Most likely before the subscriber opens (the run is held: BOOT_QUIET_MAX_MS after the claim).
    await producer.client.cancel(handle.id, { reason: 'at boot' });
    const reason = await within(abortedOf(handle.id).promise, 5_000, 'the run was told of its cancel');
    expect(reason).toBeInstanceOf(RunCancelledError);
    gates.open('cancelled');
  });
});
