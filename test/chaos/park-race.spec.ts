import { RunContext, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { uniqueNamespace } from '../support/app';
import { appOn, proxiedServer } from '../support/fault';
import { enqueueArgs, enqueueKeys, waitParked } from '../support/queue-state';
import { RedisAdmin, sluiceConnectionName } from '../support/redis-process';
import { scriptsOn } from '../support/scripts';
import { Gates, monitorCommands } from '../support/workflows';

/**
 * A worker's park announcement against the order its replies arrive in. The worker's reserve
 * and complete calls share one connection, so Redis runs them in the order they were sent, but
 * the worker learns of their outcome only as their replies come in — and its blocking read, on
 * another connection, may end in between. A TCP proxy holds the replies of the worker's command
 * connection back to fix one such order.
 */
jest.setTimeout(60_000);

const gates = new Gates();
const begun = new Gates();

@Workflow('race.hold')
class HoldWorkflow {
  async run(input: { key: string; hold?: boolean }, _ctx: RunContext) {
    begun.open(input.key);
    if (input.hold) await gates.get(input.key).promise;
    return input.key;
  }
}

describe("a worker's park announcement and the order of its replies", () => {
  const redis = proxiedServer();

  it('a run queued behind a handoff is claimed at once after a complete call parked the worker while it reserved', async () => {
    const ns = uniqueNamespace('race');
    const keys = new RedisKeys('sluice', ns);
    const admin = new RedisAdmin(redis.raw);
    const wf = 'race.hold';
    // Blocks of 5 s (MAX_BLOCK_MS): no stalled scan or due run ends one sooner.
    const worker = await appOn(redis.proxy.url, [HoldWorkflow], {
      namespace: ns,
      worker: { concurrency: 3, stalledIntervalMs: 60_000, lockMs: 60_000 },
    });
    const producer = await appOn(redis.server.url, [], { namespace: ns, worker: { enabled: false } });
    const monitor = await monitorCommands(ns, redis.raw);
    const script = (name: string) => (args: string[]) => args[0] === 'fcall' && args[1].endsWith(`_${name}`) && args.includes(keys.base);
    const blocked = () =>
      admin.clientsWhen(
        { namePrefix: sluiceConnectionName(ns, 'blocking') },
        (clients) => clients.some((c) => c.cmd === 'blpop' && /b/.test(c.flags)),
        'the worker blocked on its wake list',
      );
    try {
      await waitParked(redis.raw, keys, wf);
      const first = await producer.client.enqueue(HoldWorkflow, { key: 'first', hold: true });
      await begun.get('first').promise;
      await blocked();

      // The worker's command connection (the producer's of the same name is not proxied).
      const commandAddrs = new Set((await admin.clients({ namePrefix: sluiceConnectionName(ns, 'command') })).map((c) => c.addr));
      expect(redis.proxy.holdReplies((c) => commandAddrs.has(c.upstreamAddress ?? ''))).toBe(1);
      // A wake marker ends the block: the worker reserves (finding nothing; its reply is held).
      await redis.raw.rpush(keys.wake(wf), '1');
      await monitor.next(script('reserve'));
      // The held run finishes meanwhile: its complete call, sent after the reserve and so run
      // after it, finds nothing to refill and announces the worker parked.
      gates.open('first');
      await monitor.next(script('complete'));
      redis.proxy.releaseReplies();
      expect(await first.result({ timeoutMs: 10_000 })).toBe('first');
      await blocked();

      // One run handed over (and held: a slot stays free, so the worker blocks again), one
      // queued behind it with a wake marker. Taking that marker must bring a reserve; believing
      // the complete call's park, the worker blocked again instead, and the run waited for the
      // block's timeout (5 s).
      const scripts = scriptsOn(redis.raw);
      const multi = redis.raw.multi();
      for (const key of ['handed', 'queued']) {
        scripts.queue(multi, 'enqueue', enqueueKeys(keys, key), enqueueArgs(keys, wf, key, { key, hold: key === 'handed' }, true));
      }
      // The handed-over run's reply names its lease token and the worker (see lua/enqueue.lua).
      expect(((await multi.exec()) ?? []).map(([, reply]) => reply)).toEqual([expect.stringMatching(/^\+active \d+ \S+$/), '+waiting']);
      expect(await producer.client.wait('queued', { timeoutMs: 2_000 })).toBe('queued');
    } finally {
      gates.openAll();
      await monitor.close();
      await producer.close();
      await worker.close();
    }
  });
});
