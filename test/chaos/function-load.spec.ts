import { RedisConnectionError, RunContext, Workflow } from '../../lib';
import { uniqueNamespace } from '../support/app';
import { appOn, proxiedServer } from '../support/fault';

/**
 * The Lua library is loaded on demand: a call that finds it missing (a restart without
 * persistence, `FUNCTION FLUSH`) sends `FUNCTION LOAD`, then itself again. That load is a Redis
 * call like any other: if its reply never comes, the call that made it must still end within its
 * bound, and the app must load the library and carry on once Redis answers again.
 */
jest.setTimeout(60_000);

@Workflow('fload.echo')
class EchoWorkflow {
  async run(input: { key: string }, _ctx: RunContext): Promise<string> {
    return `echo:${input.key}`;
  }
}

describe('a FUNCTION LOAD whose reply never comes', () => {
  const redis = proxiedServer();

  it('fails the call that needed it within the call bound, and the app loads the library again once Redis answers', async () => {
    const redisTimeoutMs = 1_000;
    const app = await appOn(redis.proxy.url, [EchoWorkflow], { namespace: uniqueNamespace('fload'), redisTimeoutMs });
    try {
      expect(await app.client.run(EchoWorkflow, { key: 'before' }, { timeoutMs: 10_000 })).toBe('echo:before');
      await redis.raw.call('FUNCTION', 'FLUSH');
      // Every FUNCTION LOAD sent from now on (the command as ioredis writes it) is lost, with its
      // connection: no reply, no reset.
      redis.proxy.blackholeOn('$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n');

      const startedAt = Date.now();
      const error = await app.client.enqueue(EchoWorkflow, { key: 'during' }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(RedisConnectionError);
      // The call's bound (redisTimeoutMs), plus the sweep's resolution and a loaded machine's slack.
      expect(Date.now() - startedAt).toBeLessThan(redisTimeoutMs + 2_000);
      expect(redis.proxy.connections().some((c) => c.blackholed)).toBe(true); // the load was what hung

      redis.proxy.restore({ resetTainted: true });
      expect(await app.client.run(EchoWorkflow, { key: 'after' }, { timeoutMs: 20_000 })).toBe('echo:after');
      expect(String(await redis.raw.call('FUNCTION', 'LIST'))).toMatch(/sluice_/);
    } finally {
      await app.close();
    }
  });
});
