import Redis from 'ioredis';
import { QueueHealth, RunContext, Workflow } from '../../lib';
import { BLOCK_GRACE_MS, MAX_BLOCK_MS } from '../../lib/worker/wake.listener';
import { uniqueNamespace } from '../support/app';
import { appOn } from '../support/fault';
import { RedisProcess } from '../support/redis-process';
import { freePort } from '../support/redis-server';
import { pollUntil } from '../support/workflows';

/**
 * A worker whose reserve loop comes round but fails every time: its Redis became a read-only
 * replica (as after a failover that left the process on the old primary), so PING answers and the
 * loop keeps going, yet every reserve is refused with READONLY. Health must say so.
 */
jest.setTimeout(60_000);

@Workflow('health.failing')
class EchoWorkflow {
  async run(input: { key: string }, _ctx: RunContext) {
    return input.key;
  }
}

const REDIS_TIMEOUT_MS = 1_000;
const STALLED_INTERVAL_MS = 500;
/** The documented bound (see QueueHealth): the loop's own bound. */
const BOUND_MS = Math.max(MAX_BLOCK_MS, STALLED_INTERVAL_MS) + BLOCK_GRACE_MS + 2 * REDIS_TIMEOUT_MS;

describe('health of a worker whose every reserve fails', () => {
  let server: RedisProcess;
  let admin: Redis;

  beforeAll(async () => {
    server = await RedisProcess.start();
    admin = new Redis(server.url);
  });

  afterAll(async () => {
    admin?.disconnect();
    await server?.stop();
  });

  it('goes unhealthy within the loop bound although PING works, naming the error, and healthy again once reserves succeed', async () => {
    const ns = uniqueNamespace('failing');
    const app = await appOn(server.url, [EchoWorkflow], {
      namespace: ns,
      redisTimeoutMs: REDIS_TIMEOUT_MS,
      worker: { stalledIntervalMs: STALLED_INTERVAL_MS },
    });
    try {
      const health = app.app.get(QueueHealth);
      expect(await app.client.run(EchoWorkflow, { key: 'before' }, { timeoutMs: 10_000 })).toBe('before');
      expect((await health.check()).healthy).toBe(true);

      // A replica of a primary that does not exist: reads work, every write is refused.
      await admin.call('REPLICAOF', '127.0.0.1', String(await freePort()));
      const down = await pollUntil(
        () => health.check(500),
        (report) => !report.healthy,
        'health to go down',
        BOUND_MS + 10_000,
      );
      expect(down.redis.up).toBe(true);
      expect(down.worker.state).toBe('running');
      // Either symptom may show first: the reserves failing, or the blocking connection, which
      // reconnects at each READONLY (a demoted server may be behind a name that moves), never ready for long.
      expect(down.worker.error).toMatch(/^(reserve loop failing|blocking connection down) for \d+ ms .*READONLY/);

      await admin.call('REPLICAOF', 'NO', 'ONE');
      await pollUntil(
        () => health.check(500),
        (report) => report.healthy,
        'health to come back',
        15_000,
      );
      expect(await app.client.run(EchoWorkflow, { key: 'after' }, { timeoutMs: 10_000 })).toBe('after');
    } finally {
      await app.close();
    }
  });
});
