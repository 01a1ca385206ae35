import { assessRedisServer, compareVersions, infoField, MIN_REDIS_VERSION } from '../../lib/redis/redis-server.check';

/**
 * The boot checks' verdicts, for servers this machine cannot run (an old Redis) as well as the
 * ones the e2e tests start (test/e2e/boot-checks.spec.ts).
 */
describe('Redis server boot checks: assessment', () => {
  const ok = { version: '7.0.15', policy: 'noeviction', maxmemory: 0, aof: true };

  it('parses INFO and compares versions numerically', () => {
    const info =
      '# Server\r\nredis_version:6.2.14\r\nredis_mode:standalone\r\n\r\n# Memory\r\nmaxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:allkeys-lru';
    expect(infoField(info, 'redis_version')).toBe('6.2.14');
    expect(infoField(info, 'maxmemory')).toBe('0');
    expect(infoField(info, 'maxmemory_policy')).toBe('allkeys-lru'); // the last line, no line end
    expect(infoField(info, 'redis_mode:standalone')).toBeUndefined();
    expect(infoField(info, 'mode')).toBeUndefined(); // only a whole field name
    expect(infoField(info, 'Server')).toBeUndefined();
    expect(infoField('loading:1\r\n', 'loading')).toBe('1'); // the first line
    expect(compareVersions('6.2.14', '6.0.0')).toBe(1);
    expect(compareVersions('6.0.0', '6.0')).toBe(0);
    expect(compareVersions('5.0.14', '6.0.0')).toBe(-1);
    expect(compareVersions('10.0.0', '9.9.9')).toBe(1);
    expect(MIN_REDIS_VERSION).toBe('7.0.0');
  });

  it('accepts a current noeviction server with AOF without a word', () => {
    expect(assessRedisServer(ok, true)).toEqual({ warnings: [], notes: [] });
  });

  it('refuses a Redis older than 7.0 whatever strict says (the scripts carry #!lua flags)', () => {
    for (const strict of [false, true]) {
      expect(assessRedisServer({ ...ok, version: '6.2.14' }, strict).fatal).toBe(
        'Redis 6.2.14 is not supported: Sluice needs Redis 7.0.0 or later (its scripts and blocking reads use commands and script flags older servers lack)',
      );
    }
    expect(assessRedisServer({ ...ok, version: '7.0.0' }, false).fatal).toBeUndefined();
  });

  it('refuses a Redis Cluster node reached through single-server options, accepts it with cluster options', () => {
    expect(assessRedisServer({ ...ok, clusterNode: true, clusterOptions: false }, false).fatal).toMatch(
      /^Redis is a Redis Cluster node but options.connection names a single server/,
    );
    expect(assessRedisServer({ ...ok, clusterNode: true, clusterOptions: true }, false).fatal).toBeUndefined();
    expect(assessRedisServer({ ...ok, clusterNode: false, clusterOptions: false }, false).fatal).toBeUndefined();
  });

  it('refuses a replica, naming its primary and the Sentinel option', () => {
    expect(assessRedisServer({ ...ok, replicaOf: '10.0.0.5:6379' }, false).fatal).toMatch(
      /^Redis is a replica \(of 10\.0\.0\.5:6379\): Sluice needs the primary.*sentinels/,
    );
  });

  it('warns about allkeys-* (data loss) and refuses it with strict; notes volatile-*', () => {
    const lru = assessRedisServer({ ...ok, policy: 'allkeys-lru', maxmemory: 1 << 30 }, false);
    expect(lru.fatal).toBeUndefined();
    expect(lru.warnings).toEqual([
      expect.stringMatching(
        /^Redis maxmemory-policy is allkeys-lru: under memory pressure Redis may evict any key, including queued and active runs/,
      ),
    ]);
    expect(assessRedisServer({ ...ok, policy: 'allkeys-lfu' }, false).warnings[0]).toContain(
      '(maxmemory is 0 now, so nothing is evicted until a limit is set)',
    );
    expect(assessRedisServer({ ...ok, policy: 'allkeys-random' }, true).fatal).toMatch(/allkeys-random.*refused because strict is true$/);

    const volatile = assessRedisServer({ ...ok, policy: 'volatile-lru' }, true);
    expect(volatile).toEqual({
      warnings: [],
      notes: [expect.stringContaining("finished runs' results may be evicted before resultTtlMs")],
    });
  });

  it('notes a server without persistence, and says when persistence could not be checked', () => {
    expect(assessRedisServer({ ...ok, aof: false, rdb: true }, false)).toEqual({ warnings: [], notes: [] });
    expect(assessRedisServer({ ...ok, aof: false, rdb: false }, false).notes).toEqual([expect.stringMatching(/^Redis has no persistence/)]);
    expect(assessRedisServer({ ...ok, aof: false, configRefused: 'NOPERM' }, false).notes).toEqual([
      expect.stringContaining('Redis refused CONFIG GET save (NOPERM)'),
    ]);
  });

  it('degrades to a warning when INFO is refused, strict or not, and when it lacks a version', () => {
    for (const strict of [false, true]) {
      const refused = assessRedisServer({ infoRefused: "NOPERM User x has no permissions to run the 'info' command" }, strict);
      expect(refused.fatal).toBeUndefined();
      expect(refused.warnings).toEqual([
        expect.stringMatching(/^Redis refused INFO \(NOPERM .*\): its version, maxmemory-policy and persistence were not checked/),
      ]);
      expect(refused.notes).toEqual([]);
    }
    // CONFIG refused as well (a managed service's user): that refusal gets its own line too.
    const both = assessRedisServer({ infoRefused: 'NOPERM info', configRefused: 'NOPERM config' }, false);
    expect(both.warnings).toEqual([expect.stringMatching(/^Redis refused INFO \(NOPERM info\)/)]);
    expect(both.notes).toEqual([
      'Redis refused CONFIG GET save (NOPERM config): its save points were not checked either; nothing else needs CONFIG',
    ]);
    expect(assessRedisServer({ ...ok, version: undefined }, true).warnings).toEqual([expect.stringContaining('reports no redis_version')]);
  });
});
