import { Cluster } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { InvalidOptionError, QueueConfigError } from '../../lib';
import { clusterSettings } from '../../lib/interfaces/cluster.options';
import { keySlot } from '../../lib/redis/cluster/key-slot';
import { resolveQueueOptions } from '../../lib/interfaces/queue.options';

describe('Redis Cluster connection options', () => {
  it('normalises seeds, credentials, TLS and natMap', () => {
    const natMap = { '10.0.0.1:6379': { host: 'localhost', port: 7000 } };
    expect(clusterSettings({ cluster: [{ host: 'a', port: 7000 }], username: 'u', password: 'p', tls: true, natMap })).toEqual({
      seeds: [{ host: 'a', port: 7000 }],
      username: 'u',
      password: 'p',
      tls: {},
      natMap,
    });
    expect(clusterSettings({ url: 'redis://x:1' })).toBeUndefined();
  });

  it('reads an ioredis Cluster instance without connecting it', () => {
    const instance = new Cluster(['redis://b:7001', { host: 'c', port: 7002 }, 7003], {
      lazyConnect: true,
      redisOptions: { password: 'secret' },
      natMap: { 'x:1': { host: 'y', port: 2 } },
    });
    expect(clusterSettings(instance)).toEqual({
      seeds: [
        { host: 'b', port: 7001 },
        { host: 'c', port: 7002 },
        { host: '127.0.0.1', port: 7003 },
      ],
      username: undefined,
      password: 'secret',
      tls: undefined,
      natMap: { 'x:1': { host: 'y', port: 2 } },
    });
    expect(instance.status).toBe('wait');
    const prefixed = new Cluster([{ host: 'a', port: 1 }], { lazyConnect: true, redisOptions: { keyPrefix: 'p:' } });
    expect(() => resolveQueueOptions({ connection: prefixed })).toThrow(/keyPrefix "p:" is not supported/);
  });

  it.each([
    [{ cluster: [] }, /cluster must be a non-empty array/],
    [{ cluster: 'a:1' }, /cluster must be a non-empty array/],
    [{ cluster: [{ host: '', port: 1 }] }, /cluster\[0\]\.host must be a non-empty string/],
    [{ cluster: [{ host: 'a', port: 70_000 }] }, /cluster\[0\]\.port must be a port number/],
    [{ cluster: [{ host: 'a', port: 1.5 }] }, /cluster\[0\]\.port must be a port number/],
    [{ cluster: [{ host: 'a', port: 1 }], password: 5 }, /password must be a string/],
    [{ cluster: [{ host: 'a', port: 1 }], natMap: { 'a:1': { host: 'b' } } }, /natMap\["a:1"\]\.port/],
  ])('refuses %j with a QueueConfigError before any I/O', (connection, message) => {
    expect(() => resolveQueueOptions({ connection: connection as never })).toThrow(QueueConfigError);
    expect(() => resolveQueueOptions({ connection: connection as never })).toThrow(message);
  });

  it('refuses an unknown key of a cluster connection (or of a seed) with an InvalidOptionError before any I/O', () => {
    const refuse = (connection: unknown, message: RegExp) => {
      expect(() => resolveQueueOptions({ connection: connection as never })).toThrow(InvalidOptionError);
      expect(() => resolveQueueOptions({ connection: connection as never })).toThrow(message);
    };
    refuse({ cluster: [{ host: 'a', port: 1 }], db: 1 }, /^QueueModule options\.connection\.db: is not an option here/);
    refuse({ cluster: [{ host: 'a', port: 1 }], pasword: 'x' }, /connection\.pasword: .*did you mean `password`\?/);
    refuse({ cluster: [{ host: 'a', prot: 1 }] }, /connection\.cluster\[0\]\.prot: .*did you mean `port`\?/);
  });

  it('keySlot agrees with cluster-key-slot on 5,000 random keys with and without hash tags', () => {
    const alphabet = 'ab{}:*?[] é雪0';
    for (let i = 0; i < 5_000; i++) {
      const key = Array.from({ length: 1 + (i % 17) }, (_, j) => alphabet[(i * 7 + j * 13 + (i >> 3)) % alphabet.length]).join('');
      // cluster-key-slot hashes "x{}{y}" by "y"; Redis (and keySlot) hash the whole key when the first tag is empty.
      if (/\{\}/.test(key.slice(0, key.indexOf('}') + 1))) continue;
      expect([key, keySlot(key)]).toEqual([key, calculateSlot(key)]);
    }
    expect(keySlot('x{}{y}')).toBe(14_166); // CLUSTER KEYSLOT x{}{y} on Redis 7.0
  });
});
