import 'reflect-metadata';
import { Provider } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { randomBytes } from 'node:crypto';
import Redis, { Cluster } from 'ioredis';
import { QueueClient, QueueModule, QueueModuleOptions } from '../../lib';
import { isCluster, scanEach } from './scan';
import { secureAdmin, secureConnection, testTls } from './secure';

export function redisUrl(): string {
  const url = process.env.REDIS_URL;
  if (!url) throw new Error('REDIS_URL is not set: run tests through jest (its global setup starts redis-server)');
  return url;
}

/** A node of the test cluster, as ioredis takes it. */
export interface ClusterSeedNode {
  host: string;
  port: number;
}

/**
 * The seed nodes of the test Redis Cluster — SLUICE_TEST_CLUSTER, a JSON array `[{ host, port }, …]`
 * set by the cluster suite's global setup (cluster.global-setup.ts) — or undefined: not in
 * cluster mode, tests use the single server of REDIS_URL.
 */
export function testCluster(): ClusterSeedNode[] | undefined {
  const raw = process.env.SLUICE_TEST_CLUSTER;
  if (!raw) return undefined;
  let seeds: unknown;
  try {
    seeds = JSON.parse(raw);
  } catch {
    seeds = undefined;
  }
  const valid = Array.isArray(seeds) && seeds.length > 0 && seeds.every((s) => typeof s?.host === 'string' && Number.isInteger(s?.port));
  if (!valid) throw new Error(`SLUICE_TEST_CLUSTER must be a JSON array of { host, port }, got ${raw}`);
  return seeds as ClusterSeedNode[];
}

/**
 * The `connection` option of the tests' QueueModule: the test cluster's seeds in cluster mode
 * (SLUICE_TEST_CLUSTER set); in the secure suite (SLUICE_TEST_TLS, see ./secure), the TLS
 * server as the `app` ACL user, whose rule is the documented ones' union: the app itself holds
 * no other permission; else the test server's URL.
 */
export function testConnection(): QueueModuleOptions['connection'] {
  const tls = testTls();
  if (tls) return secureConnection(tls);
  const seeds = testCluster();
  return seeds ? { cluster: seeds } : { url: redisUrl() };
}

/** A namespace no other test uses, so test files share one Redis safely and in parallel. */
export function uniqueNamespace(label = 't'): string {
  return `${label}-${randomBytes(4).toString('hex')}`;
}

export interface TestApp {
  app: TestingModule;
  client: QueueClient;
  close(): Promise<void>;
}

/** A real Nest application with QueueModule on the test Redis (or cluster: {@link testConnection}), initialised (workers started). */
export async function createApp(providers: Provider[], options: Partial<QueueModuleOptions> & { namespace: string }): Promise<TestApp> {
  const app = await Test.createTestingModule({
    imports: [QueueModule.forRoot({ connection: testConnection(), ...options })],
    providers,
  }).compile();
  app.useLogger(process.env.SLUICE_TEST_LOGS ? ['log', 'warn', 'error'] : false);
  await app.init();
  return { app, client: app.get(QueueClient), close: () => app.close() };
}

/**
 * A plain connection for assertions on raw Redis state; in cluster mode an ioredis Cluster client,
 * typed as Redis so existing tests compile unchanged. That holds for the commands on a
 * namespace's keys (one hash tag, one slot: the Cluster routes them, MULTI included); commands
 * without keys (SCAN, KEYS, INFO, CLIENT, SCRIPT, FLUSHDB, DBSIZE) go to one node at random —
 * scan with scanKeys / scanEach (./scan), or check `isCluster(redis)`. In the secure suite, the
 * admin (default) user over TLS: raw checks and cleanup need more than the apps' ACL user may do.
 */
export function rawRedis(): Redis {
  const tls = testTls();
  if (tls) return secureAdmin(tls);
  const seeds = testCluster();
  return seeds ? (new Cluster(seeds) as unknown as Redis) : new Redis(redisUrl());
}

/** Deletes every key of a test namespace (only keys this test created); on a cluster, scans every master. */
export async function dropNamespace(redis: Redis | Cluster, namespace: string, prefix = 'sluice'): Promise<void> {
  // Each page is deleted on the node that holds it: the keys are all of one slot, served there.
  await scanEach(redis, `{${prefix}:${namespace}}:*`, async (keys, node) => void (await node.del(...keys)));
}

export { isCluster };
