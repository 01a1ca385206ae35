import type Redis from 'ioredis';
import { QueueModuleOptions, RedisUnavailableError, RunContext, Workflow } from '../../lib';
import { createApp, dropNamespace, rawRedis, uniqueNamespace, type TestApp } from '../support/app';
import { rejection } from '../support/rejection';
import { testTls } from '../support/secure';

/**
 * The secure suite's server takes TLS connections only. An app that gets the connection wrong
 * boots (Redis being away does not fail a boot) and its calls fail with RedisUnavailableError
 * within redisTimeoutMs: no hang, and the error says why.
 */
@Workflow('tls.echo', { attempts: 1 })
class Echo {
  async run(input: string, ctx: RunContext) {
    return ctx.step('echo', () => input);
  }
}

const server = testTls()!;
const BOUND_MS = 500;

describe('TLS', () => {
  let admin: Redis;
  const apps: TestApp[] = [];
  const namespaces: string[] = [];

  beforeAll(() => {
    admin = rawRedis();
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    for (const namespace of namespaces.splice(0)) await dropNamespace(admin, namespace);
  });
  afterAll(() => admin.quit());

  /** A producer-only app (nothing runs in the background) with `connection`, and how long a failed enqueue took. */
  async function failedEnqueue(connection: QueueModuleOptions['connection']): Promise<{ error: unknown; ms: number }> {
    const namespace = uniqueNamespace('tls');
    namespaces.push(namespace);
    const app = await createApp([Echo], { namespace, connection, worker: { enabled: false }, redisTimeoutMs: BOUND_MS });
    apps.push(app);
    const started = Date.now();
    const error = await rejection(() => app.client.enqueue(Echo, 'x'));
    return { error, ms: Date.now() - started };
  }

  it('listens on TLS only, and an app with a rediss:// URL and the CA works (as the suite does)', async () => {
    expect(await admin.config('GET', 'port')).toEqual(['port', '0']);
    expect(await admin.config('GET', 'tls-port')).toEqual(['tls-port', String(server.port)]);
    const namespace = uniqueNamespace('tls');
    namespaces.push(namespace);
    const app = await createApp([Echo], { namespace });
    apps.push(app);
    expect(await app.client.run(Echo, 'over tls', { timeoutMs: 10_000 })).toBe('over tls');
  });

  it('a plain redis:// connection to the TLS port: RedisUnavailableError within redisTimeoutMs', async () => {
    const { error, ms } = await failedEnqueue({ url: `redis://sluice-app:${server.password}@127.0.0.1:${server.port}` });
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect((error as Error).message).toMatch(
      /closed before Redis answered anything: if that port takes TLS, use a rediss:\/\/ URL.*nothing was sent/,
    );
    expect(ms).toBeLessThan(BOUND_MS + 1_000);
  });

  it('TLS without the CA that signed the server certificate: refused, RedisUnavailableError naming why, within the bound', async () => {
    const { error, ms } = await failedEnqueue({ url: `rediss://sluice-app:${server.password}@127.0.0.1:${server.port}` });
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect((error as Error).message).toMatch(/self[- ]signed certificate/);
    expect(ms).toBeLessThan(BOUND_MS + 1_000);
  });
});
