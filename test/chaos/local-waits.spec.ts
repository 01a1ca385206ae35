import type { TestingModule } from '@nestjs/testing';
import { QueueClient, RunContext, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { uniqueNamespace } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { appOn, proxiedServer } from '../support/fault';
import { channelSubscribers } from '../support/pubsub';
import { RedisAdmin, sluiceConnectionName } from '../support/redis-process';
import { waitParked } from '../support/queue-state';
import type { ProxyConnection } from '../support/tcp-proxy';
import { Counter, Gates, pollUntil } from '../support/workflows';
import { SluiceServices } from '../../lib/sluice.services';

/**
 * Within one app, a run() needs no pub/sub: an enqueue that Redis hands to the app's own parked
 * worker starts the run from its reply, and Redis publishes no handoff for it
 * (lib/interfaces/local.worker.ts), and the worker tells the app's wait from its complete call's
 * reply, which Redis then does not announce on the app's inbox (lib/interfaces/local.waits.ts).
 * The app reaches Redis through a TCP proxy that holds back what one of its connections receives.
 */
jest.setTimeout(60_000);

const gates = new Gates();
const begun = new Gates();
const started = new Counter();

@Workflow('lw.gate')
class GateWorkflow {
  async run(input: { key: string }, _ctx: RunContext): Promise<string> {
    started.inc(input.key);
    begun.open(input.key);
    await gates.get(input.key).promise;
    return `gate:${input.key}`;
  }
}

describe('a run() in the app whose worker runs it', () => {
  const redis = proxiedServer();

  /** The app's connection of that role (every one of its connections passes the proxy). */
  async function connection(namespace: string, role: 'command' | 'subscriber') {
    const addrs = (await new RedisAdmin(redis.raw).clients({ namePrefix: sluiceConnectionName(namespace, role) })).map((c) => c.addr);
    expect(addrs).toHaveLength(1);
    return (c: ProxyConnection) => c.upstreamAddress === addrs[0];
  }

  /** Waits until the run's record is in `state`. */
  function runReaches(keys: RedisKeys, id: string, state: string, what: string) {
    return pollUntil(
      () => redis.raw.hget(keys.run(id), 'state'),
      (found) => found === state,
      what,
    );
  }

  /** Kills the app's command connection, with any reply the proxy holds on it: the clients killed. */
  function killCommandConnection(namespace: string) {
    return new RedisAdmin(redis.raw).killClients({ namePrefix: sluiceConnectionName(namespace, 'command') });
  }

  /** A first run() through `t` (gate `key`), then its inbox subscribed: later run()s wait on it alone. */
  async function warmUp(t: { app: TestingModule; client: QueueClient }, key: string): Promise<void> {
    gates.open(key);
    expect(await t.client.run(GateWorkflow, { key })).toBe(`gate:${key}`);
    await pollUntil(
      () => channelSubscribers(redis.raw, t.app.get(SluiceServices).waiter.inboxChannel),
      (n) => n === 1,
      'the inbox subscribed',
    );
  }

  it('resolves while its subscriber connection hears nothing, and runs once', async () => {
    const namespace = uniqueNamespace('lw');
    const t = await appOn(redis.proxy.url, [GateWorkflow], { namespace });
    try {
      gates.open('quiet');
      gates.open('after');
      await warmUp(t, 'warm');
      await waitParked(redis.raw, new RedisKeys('sluice', namespace), 'lw.gate');
      expect(redis.proxy.holdReplies(await connection(namespace, 'subscriber'))).toBe(1);
      // Handed to the parked worker: started from the enqueue's reply, told from the complete's.
      expect(await t.client.run(GateWorkflow, { key: 'quiet' })).toBe('gate:quiet');
      redis.proxy.releaseReplies();
      // Whatever the subscriber was held from is read before the next run's reply: it ran once.
      expect(await t.client.run(GateWorkflow, { key: 'after' })).toBe('gate:after');
      expect([started.get('quiet'), started.get('after')]).toEqual([1, 1]);
      expectConsistent(await auditNamespace(redis.raw, { namespace }));
    } finally {
      redis.proxy.releaseReplies();
      await t.close();
    }
  });

  it("still resolves when the complete call's reply is lost: with the result, the run having run once, the namespace consistent", async () => {
    const namespace = uniqueNamespace('lw');
    const keys = new RedisKeys('sluice', namespace);
    const t = await appOn(redis.proxy.url, [GateWorkflow], { namespace, redisTimeoutMs: 5_000 });
    try {
      await warmUp(t, 'warm');

      const result = t.client.run(GateWorkflow, { key: 'lost' }, { id: 'lost' });
      await begun.get('lost').promise;
      expect(redis.proxy.holdReplies(await connection(namespace, 'command'))).toBe(1);
      gates.open('lost');
      await runReaches(keys, 'lost', 'completed', 'the complete call to run');
      // Its reply, held in the proxy, goes with the connection: the worker's link sends the call
      // again on a new one, and the retry's reply tells the wait (the first try announced nothing).
      expect(await killCommandConnection(namespace)).toHaveLength(1);
      expect(await result).toBe('gate:lost');
      expect(started.get('lost')).toBe(1);
      expectConsistent(await auditNamespace(redis.raw, { namespace }));
    } finally {
      gates.openAll();
      redis.proxy.releaseReplies();
      await t.close();
    }
  });

  it("still resolves when the enqueue's reply is lost after handing the run to its own worker: the lease lapses, the stalled scan recovers it, and it runs once", async () => {
    const namespace = uniqueNamespace('lw');
    const keys = new RedisKeys('sluice', namespace);
    // A short lease and scan interval: nothing starts a handoff whose reply was lost (Redis
    // published none), so the run waits for its lease to lapse.
    const t = await appOn(redis.proxy.url, [GateWorkflow], {
      namespace,
      redisTimeoutMs: 5_000,
      worker: { lockMs: 1_000, stalledIntervalMs: 250 },
    });
    try {
      await warmUp(t, 'warm-2');
      await waitParked(redis.raw, keys, 'lw.gate');
      expect(redis.proxy.holdReplies(await connection(namespace, 'command'))).toBe(1);
      gates.open('handed');
      const result = t.client.run(GateWorkflow, { key: 'handed' }, { id: 'handed' });
      await runReaches(keys, 'handed', 'active', 'the enqueue to hand the run to the parked worker');
      // The reply is lost with the connection; the enqueue is sent again and finds the run it made.
      expect(await killCommandConnection(namespace)).toHaveLength(1);
      expect(await result).toBe('gate:handed');
      expect(started.get('handed')).toBe(1);
      expect(await redis.raw.hmget(keys.run('handed'), 'state', 'stalls')).toEqual(['completed', '1']);
      expectConsistent(await auditNamespace(redis.raw, { namespace }));
    } finally {
      redis.proxy.releaseReplies();
      await t.close();
    }
  });
});
