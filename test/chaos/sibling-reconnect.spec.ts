import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import { RedisUnavailableError } from '../../lib';
import { LinkSiblings } from '../../lib/redis/link.siblings';
import { RedisLink } from '../../lib/redis/redis.link';
import { RedisProcess } from '../support/redis-process';

/**
 * After an outage, each of a process's connections reconnects after its own jittered pause (up to
 * 2 s), longer than a call's bound (`redisTimeoutMs`, 1 s in the outage suite): a `run()` whose
 * subscribe met the subscriber connection still in its pause failed although Redis answered. The
 * first connection ready again now has its siblings reconnect at once (LinkSiblings).
 */
jest.setTimeout(60_000);

describe('connections to one Redis after an outage', () => {
  let server: RedisProcess | undefined;
  const links: RedisLink[] = [];

  afterEach(async () => {
    await Promise.all(links.splice(0).map((link) => link.close()));
    await server?.stop();
  });

  /** A link whose ioredis instance waits `pauseMs` before each reconnect attempt. */
  const linkTo = (process: RedisProcess, role: 'command' | 'subscriber', pauseMs: number, siblings?: LinkSiblings) => {
    const link = new RedisLink(
      role,
      () => process.connect({ lazyConnect: true, enableReadyCheck: false, retryStrategy: () => pauseMs }),
      1_000,
      new Logger('test'),
      undefined,
      undefined,
      siblings,
    );
    links.push(link);
    return link;
  };

  /** Kills Redis, waits until `slow` is in its reconnect pause, and starts Redis again. */
  async function outage(process: RedisProcess, slow: RedisLink): Promise<void> {
    const reconnecting = new Promise((resolve) => slow.client.once('reconnecting', resolve));
    await process.kill('SIGKILL');
    await reconnecting;
    await process.restart();
  }

  const ping = (link: RedisLink) => link.call('ping', (redis: Redis) => redis.ping());

  it('the first connection ready again has the others reconnect at once, not after their pause', async () => {
    server = await RedisProcess.start();
    const siblings = new LinkSiblings();
    const fast = linkTo(server, 'command', 50, siblings);
    const slow = linkTo(server, 'subscriber', 60_000, siblings);
    await Promise.all([ping(fast), ping(slow)]);

    await outage(server, slow);
    await expect(ping(fast)).resolves.toBe('PONG');
    // Within its 1 s bound, though its own pause has 59 s to go.
    await expect(ping(slow)).resolves.toBe('PONG');
  });

  it('without siblings, a connection in its pause fails its call within the bound (what the nudge prevents)', async () => {
    server = await RedisProcess.start();
    const fast = linkTo(server, 'command', 50);
    const slow = linkTo(server, 'subscriber', 60_000);
    await Promise.all([ping(fast), ping(slow)]);

    await outage(server, slow);
    await expect(ping(fast)).resolves.toBe('PONG');
    await expect(ping(slow)).rejects.toBeInstanceOf(RedisUnavailableError);
  });
});
