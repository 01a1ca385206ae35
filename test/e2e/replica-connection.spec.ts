import { Test, TestingModule } from '@nestjs/testing';
import Redis from 'ioredis';
import { QueueClient, QueueConfigError, QueueModule, RedisUnavailableError, Workflow } from '../../lib';
import { uniqueNamespace } from '../support/app';
import { LocalRedis, startRedisServer } from '../support/redis-server';

/**
 * A connection that meets a replica: at boot (a misconfiguration: refused, naming the primary),
 * and after its server was demoted under it (a managed service failing over behind one DNS name):
 * the `READONLY` refusals ran nothing, so the calls reconnect and go out again within their bound.
 */
@Workflow('replica.echo')
class EchoWorkflow {
  run(input: string): string {
    return input;
  }
}

describe('a connection to a node that is, or becomes, a replica', () => {
  let primary: LocalRedis;
  let other: LocalRedis;
  let admin: Redis;
  const apps: TestingModule[] = [];

  beforeAll(async () => {
    primary = await startRedisServer();
    other = await startRedisServer();
    admin = new Redis(primary.url);
  });

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await admin.replicaof('NO', 'ONE');
  });

  afterAll(async () => {
    await admin.quit();
    await Promise.all([primary.stop(), other.stop()]);
  });

  async function boot(url: string, namespace = uniqueNamespace('replica')) {
    const app = await Test.createTestingModule({
      imports: [QueueModule.forRoot({ connection: { url }, namespace, redisTimeoutMs: 3_000 })],
      providers: [EchoWorkflow],
    }).compile();
    app.useLogger(false);
    await app.init();
    apps.push(app);
    return app.get(QueueClient);
  }

  it('refuses to boot on a replica, naming its primary, and writes nothing', async () => {
    await admin.replicaof('127.0.0.1', other.port);
    const namespace = uniqueNamespace('replica');
    const failed = boot(primary.url, namespace);
    await expect(failed).rejects.toThrow(QueueConfigError);
    await expect(failed).rejects.toThrow(`Redis is a replica (of 127.0.0.1:${other.port}): Sluice needs the primary`);
    const otherAdmin = new Redis(other.url);
    expect(await otherAdmin.keys(`{sluice:${namespace}}:*`).finally(() => otherAdmin.quit())).toEqual([]);
  });

  it('sends a call refused with READONLY again once the node is a primary again, within its bound', async () => {
    const client = await boot(primary.url);
    expect(await client.run(EchoWorkflow, 'before', { timeoutMs: 5_000 })).toBe('before');
    await admin.replicaof('127.0.0.1', other.port);
    const enqueued = client.enqueue(EchoWorkflow, 'during');
    // The first tries are refused (READONLY: nothing ran) while the node is a replica.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await admin.replicaof('NO', 'ONE');
    const handle = await enqueued;
    expect(await handle.result({ timeoutMs: 5_000 })).toBe('during');
  });

  it('fails a call with RedisUnavailableError (nothing ran) naming READONLY when the node stays a replica past the bound', async () => {
    const client = await boot(primary.url);
    await admin.replicaof('127.0.0.1', other.port);
    const started = Date.now();
    const failed = client.enqueue(EchoWorkflow, 'never');
    await expect(failed).rejects.toThrow(RedisUnavailableError);
    await expect(failed).rejects.toThrow(/READONLY/);
    expect(Date.now() - started).toBeLessThan(3_000 + 1_500);
  });
});
