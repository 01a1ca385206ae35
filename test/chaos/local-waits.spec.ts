import { RunContext, Workflow } from '../../lib';
import { RunWaiter } from '../../lib/client/run.waiter';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { uniqueNamespace } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { appOn, proxiedServer } from '../support/fault';
import { channelSubscribers } from '../support/pubsub';
import { RedisAdmin, sluiceConnectionName } from '../support/redis-process';
import { Counter, Gates, pollUntil } from '../support/workflows';

/**
 * A run() whose run its own app's worker completes is told by that worker, from the complete
 * call's reply, and Redis does not announce it on the app's inbox (lib/interfaces/local.waits.ts).
 * Here that reply is lost: the app reaches Redis through a TCP proxy that holds back what its
 * command connection receives, and the connection is killed once the call has run.
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

describe("a run() in the app whose worker loses the complete call's reply", () => {
  const redis = proxiedServer();

  it('still resolves with the result, the run having run once, and leaves the namespace consistent', async () => {
    const namespace = uniqueNamespace('lw');
    const keys = new RedisKeys('sluice', namespace);
    const t = await appOn(redis.proxy.url, [GateWorkflow], { namespace, redisTimeoutMs: 5_000 });
    try {
      gates.open('warm');
      expect(await t.client.run(GateWorkflow, { key: 'warm' })).toBe('gate:warm');
      const inbox = t.app.get(RunWaiter).inboxChannel;
      await pollUntil(
        () => channelSubscribers(redis.raw, inbox),
        (n) => n === 1,
        'the inbox subscribed',
      );

      const result = t.client.run(GateWorkflow, { key: 'lost' }, { id: 'lost' });
      await begun.get('lost').promise;
      const admin = new RedisAdmin(redis.raw);
      const command = (await admin.clients({ namePrefix: sluiceConnectionName(namespace, 'command') })).map((c) => c.addr);
      expect(redis.proxy.holdReplies((c) => command.includes(c.upstreamAddress ?? ''))).toBe(1);
      gates.open('lost');
      await pollUntil(
        () => redis.raw.hget(keys.run('lost'), 'state'),
        (state) => state === 'completed',
        'the complete call to run',
      );
      // Its reply, held in the proxy, goes with the connection: the worker's link sends the call
      // again on a new one, and the retry's reply tells the wait (the first try announced nothing).
      expect(await admin.killClients({ namePrefix: sluiceConnectionName(namespace, 'command') })).toHaveLength(1);
      expect(await result).toBe('gate:lost');
      expect(started.get('lost')).toBe(1);
      expectConsistent(await auditNamespace(redis.raw, { namespace }));
    } finally {
      gates.openAll();
      redis.proxy.releaseReplies();
      await t.close();
    }
  });
});
