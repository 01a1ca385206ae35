import Redis from 'ioredis';
import { QueueHealth, QueueHealthIndicator, RunContext, Workflow } from '../../lib';
import { MAX_RECONNECT_DELAY_MS } from '../../lib/redis/redis.factory';
import { uniqueNamespace } from '../support/app';
import { appOn } from '../support/fault';
import { RedisAdmin, RedisProcess, sluiceConnectionName } from '../support/redis-process';
import { TcpProxy } from '../support/tcp-proxy';
import { pollUntil } from '../support/workflows';

/**
 * A worker whose blocking connection is gone for good while its command connection works: PING
 * answers, the reserve loop still comes round (each blocking read gives up within its bound), but
 * no enqueue can wake the worker. The worker reaches Redis through a TCP proxy; the test kills the
 * blocking connection on the server (CLIENT KILL) and has the proxy reset every new connection.
 */
jest.setTimeout(60_000);

@Workflow('health.blocking')
class EchoWorkflow {
  async run(input: { key: string }, _ctx: RunContext) {
    return input.key;
  }
}

const REDIS_TIMEOUT_MS = 1_000;
/** The documented bound: down for longer than redisTimeoutMs + the longest reconnect pause. */
const BOUND_MS = REDIS_TIMEOUT_MS + MAX_RECONNECT_DELAY_MS;

describe('health of a worker cut off from its blocking connection', () => {
  let server: RedisProcess;
  let proxy: TcpProxy;
  let admin: RedisAdmin;

  beforeAll(async () => {
    server = await RedisProcess.start();
    proxy = await TcpProxy.start({ port: server.port });
    admin = new RedisAdmin(new Redis(server.url));
  });

  afterAll(async () => {
    await admin?.close();
    await proxy?.close();
    await server?.stop();
  });

  it(`goes down within redisTimeoutMs + ${MAX_RECONNECT_DELAY_MS} ms although PING works, and up again once the connection can come back`, async () => {
    const ns = uniqueNamespace('cutoff');
    const app = await appOn(proxy.url, [EchoWorkflow], { namespace: ns, redisTimeoutMs: REDIS_TIMEOUT_MS, worker: { lockMs: 5_000 } });
    try {
      const indicator = app.app.get(QueueHealthIndicator);
      const blocking = sluiceConnectionName(ns, 'blocking');
      expect(await app.client.run(EchoWorkflow, { key: 'before' }, { timeoutMs: 10_000 })).toBe('before');
      await admin.clientsWhen({ namePrefix: blocking }, (clients) => clients.length === 1, 'the blocking connection');
      expect(await indicator.isHealthy()).toMatchObject({ sluice: { status: 'up' } });

      proxy.refuseNew();
      const cutAt = Date.now();
      expect(await admin.killClients({ namePrefix: blocking })).toHaveLength(1);

      const down = await pollUntil(
        () => indicator.isHealthy('sluice', { timeoutMs: 500 }),
        (result) => result.sluice.status === 'down',
        'the indicator to go down',
        BOUND_MS + 5_000,
      );
      const detectedAfter = Date.now() - cutAt;
      // Not a blip detector (a killed connection normally reconnects within 50 ms)…
      expect(detectedAfter).toBeGreaterThanOrEqual(BOUND_MS - 100);
      // …and within the documented bound (plus the polling and a reconnect attempt's slack).
      expect(detectedAfter).toBeLessThan(BOUND_MS + 1_500);
      expect(down.sluice).toEqual({
        status: 'down',
        redis: { up: true },
        worker: {
          state: 'running',
          lastWakeAt: expect.any(String),
          error: expect.stringMatching(
            /^blocking connection down for \d+ ms \(over 3000 ms; last: .+\): the worker cannot be woken by new work$/,
          ),
        },
      });
      // The reconnects were tried, and refused, meanwhile.
      expect(proxy.refusedConnections).toBeGreaterThan(0);
      expect((await app.app.get(QueueHealth).check(500)).healthy).toBe(false);

      proxy.acceptNew();
      const restoredAt = Date.now();
      await pollUntil(
        () => indicator.isHealthy('sluice', { timeoutMs: 500 }),
        (result) => result.sluice.status === 'up',
        'the indicator to come up',
        10_000,
      );
      // The next reconnect attempt (at most 2 s away) gets through.
      expect(Date.now() - restoredAt).toBeLessThan(MAX_RECONNECT_DELAY_MS + 1_500);
      await admin.clientsWhen({ namePrefix: blocking }, (clients) => clients.length === 1, 'a new blocking connection');
      expect(await app.client.run(EchoWorkflow, { key: 'after' }, { timeoutMs: 15_000 })).toBe('after');
    } finally {
      proxy.acceptNew();
      await app.close();
    }
  });
});
