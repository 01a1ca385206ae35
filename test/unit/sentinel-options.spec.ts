import Redis from 'ioredis';
import { InvalidOptionError, QueueConfigError } from '../../lib';
import { resolveQueueOptions } from '../../lib/interfaces/queue.options';
import { isSentinelInstance, reconnectWhenDemoted, SENTINEL_TUNING, throughSentinel } from '../../lib/interfaces/sentinel.options';

const sentinels = [
  { host: 's1', port: 26379 },
  { host: 's2', port: 26380 },
];

describe('Redis Sentinel connection options', () => {
  it('gives ioredis the sentinels, the primary only, credentials and TLS on both sides', () => {
    const { sentinel, cluster } = resolveQueueOptions({
      connection: {
        sentinels,
        name: 'main',
        username: 'u',
        password: 'p',
        db: 2,
        tls: true,
        sentinelPassword: 'sp',
        sentinelTls: { ca: 'x' },
      },
    });
    expect(cluster).toBeUndefined();
    expect(sentinel).toEqual({
      sentinels,
      name: 'main',
      role: 'master',
      username: 'u',
      password: 'p',
      db: 2,
      tls: {},
      enableTLSForSentinelMode: true,
      sentinelPassword: 'sp',
      sentinelTLS: { ca: 'x' },
    });
  });

  it.each([
    [{ sentinels: [], name: 'm' }, QueueConfigError, /sentinels must be a non-empty array/],
    [{ sentinels: 's1:26379', name: 'm' }, QueueConfigError, /sentinels must be a non-empty array/],
    [{ sentinels: [{ host: 's1', port: 0 }], name: 'm' }, QueueConfigError, /sentinels\[0\]\.port must be a port number/],
    [{ sentinels: [{ host: '', port: 1 }], name: 'm' }, QueueConfigError, /sentinels\[0\]\.host must be a non-empty string/],
    [{ sentinels }, QueueConfigError, /connection\.name must be the primary's name/],
    [{ sentinels, name: 'm', db: -1 }, QueueConfigError, /db must be an integer/],
    [{ sentinels, name: 'm', sentinelPassword: 5 }, QueueConfigError, /sentinelPassword must be a string/],
    [{ sentinels, name: 'm', sentinelPasword: 'x' }, InvalidOptionError, /sentinelPasword.*did you mean `sentinelPassword`/],
    [{ sentinels, name: 'm', role: 'slave' }, InvalidOptionError, /connection\.role: is not an option here/],
  ])('refuses %j before any connection', (connection, type, message) => {
    const resolve = () => resolveQueueOptions({ connection: connection as never });
    expect(resolve).toThrow(type);
    expect(resolve).toThrow(message);
  });

  it('tells an ioredis instance made for Sentinel from one of a single server, without connecting', () => {
    const viaSentinel = new Redis({ sentinels, name: 'main', lazyConnect: true });
    const single = new Redis({ lazyConnect: true });
    expect(isSentinelInstance(viaSentinel)).toBe(true);
    expect(isSentinelInstance(single)).toBe(false);
    expect(resolveQueueOptions({ connection: viaSentinel }).sentinel).toBeUndefined(); // duplicated as it is
    expect(viaSentinel.status).toBe('wait');
  });

  it('reconnects on READONLY (a demoted primary) and on nothing else', () => {
    expect(reconnectWhenDemoted(new Error("READONLY You can't write against a read only replica."))).toBe(1);
    expect(reconnectWhenDemoted(new Error('ERR unknown command'))).toBe(false);
    expect(SENTINEL_TUNING.failoverDetector).toBe(true);
  });

  it('tells which connections go through Sentinel', () => {
    expect(throughSentinel({ sentinels, name: 'm' })).toBe(true);
    expect(throughSentinel(new Redis({ sentinels, name: 'm', lazyConnect: true }))).toBe(true);
    expect(throughSentinel({ url: 'redis://a:1' })).toBe(false);
    expect(throughSentinel(new Redis({ lazyConnect: true }))).toBe(false);
  });
});
