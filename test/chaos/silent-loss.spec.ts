import { QueueHealth, RunContext, Workflow } from '../../lib';
import { BLOCK_GRACE_MS, MAX_BLOCK_MS } from '../../lib/worker/wake.listener';
import { uniqueNamespace } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { appOn, proxiedServer } from '../support/fault';
import { pollUntil } from '../support/workflows';

/**
 * A network path between a worker and Redis that goes silent — no reset, no FIN, as in a
 * partition — through a TCP proxy that stops forwarding. Without a client-side guard an idle
 * worker would wait on its blocking read until the OS keepalive gives up (hours).
 */
jest.setTimeout(120_000);

@Workflow('silent.echo')
class EchoWorkflow {
  async run(input: { key: string }, _ctx: RunContext): Promise<string> {
    return `echo:${input.key}`;
  }
}

describe('a silent network loss between a worker and Redis', () => {
  const redis = proxiedServer();

  it('is noticed within the block time plus grace (dead connections replaced), and the worker resumes when the path returns', async () => {
    const ns = uniqueNamespace('silent');
    const worker = await appOn(redis.proxy.url, [EchoWorkflow], { namespace: ns, redisTimeoutMs: 2_000, worker: { lockMs: 10_000 } });
    // The producer talks to Redis directly; fastPath off, so a wake is a bare marker (nothing to lose).
    const producer = await appOn(redis.server.url, [], { namespace: ns, worker: { enabled: false }, fastPath: false });
    try {
      expect(await producer.client.run(EchoWorkflow, { key: 'before' }, { timeoutMs: 20_000 })).toBe('echo:before');
      const opened = redis.proxy.totalConnections;

      redis.proxy.blackhole();
      const lostAt = Date.now();
      const handle = await producer.client.enqueue(EchoWorkflow, { key: 'during' });
      // Noticed: the worker gives up on its silent connections and opens new ones (which the
      // partition swallows too). Bound: a block (at most MAX_BLOCK_MS) plus BLOCK_GRACE_MS.
      await pollUntil(
        async () => redis.proxy.totalConnections,
        (total) => total > opened,
        'the worker to replace a silent connection',
        MAX_BLOCK_MS + BLOCK_GRACE_MS + 5_000,
      );
      expect(Date.now() - lostAt).toBeLessThan(MAX_BLOCK_MS + BLOCK_GRACE_MS + 3_000);
      const health = await worker.app.get(QueueHealth).check(1_000);
      expect(health).toMatchObject({ healthy: false, redis: { up: false } });

      redis.proxy.restore({ resetTainted: true });
      expect(await handle.result({ timeoutMs: 30_000 })).toBe('echo:during');
      await pollUntil(
        () => worker.app.get(QueueHealth).check(),
        (report) => report.healthy,
        'a healthy worker again',
        20_000,
      );
      expectConsistent(await auditNamespace(redis.raw, { namespace: ns }));
    } finally {
      await producer.close();
      await worker.close();
    }
  });
});
