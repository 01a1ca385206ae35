/**
 * The cluster scenario: drain-c50's job shape (N echo runs pre-enqueued, untimed; worker start →
 * all committed, concurrency 50) on a local 3-master Redis Cluster, through one namespace
 * (`cluster-1ns`) and spread over three namespaces, one per shard (`cluster-3ns`), plus the same
 * as `cluster-1ns` on the plain redis-server (`single-1ns`) as the baseline.
 *
 * Every variant runs its workers in forked processes (worker.pool.ts), one per namespace, as a
 * fleet would, so the three variants differ only in where their Redis is and how many namespaces
 * share the work. Three Nest apps in one process would share one event loop: the client side
 * capped at one core, which measures Node rather than the cluster once cores are plentiful (on
 * 2 cores both layouts are bound by the machine and measured about the same).
 *
 * Reported per node: Redis CPU (INFO cpu) and commands around the timed part; per run: worker
 * CPU, and cores busy for the run and the whole machine (a shared host's other tenants show as
 * the difference). On 2 cores, 3 shards + 3 workers cannot scale out: read the per-shard µs/job.
 */
import Redis from 'ioredis';
import { loadavg } from 'node:os';
import type { QueueModuleOptions } from '../lib';
import { LocalCluster, namespaceOnShard, startRedisCluster } from '../test/support/redis-cluster';
import type { LocalRedis } from '../test/support/redis-server';
import { DEFAULT_JOBS, withTimeout } from './bench.types';
import { machineCoresBusy, machineCpu } from './machine.stats';
import { costBetween, RedisCost, snapshot } from './redis.stats';
import { countRunsOn } from './sluice.system';
import { isStopping, onTeardown } from './teardown';
import { WorkerPool } from './worker.pool';

export const CLUSTER_SCENARIO = 'cluster';
export const CLUSTER_JOBS = DEFAULT_JOBS['drain-c50'];
const WARM_UP_JOBS = 6_000;
export const CLUSTER_VARIANTS = ['single-1ns', 'cluster-1ns', 'cluster-3ns'] as const;
export type ClusterVariant = (typeof CLUSTER_VARIANTS)[number];

/** One Redis node observed during a run: the jobs its namespaces held and what it spent. */
export interface NodeCost {
  /** 'single' or 'shard1'…'shard3' (masters in slot order). */
  node: string;
  port: number;
  namespaces: string[];
  jobs: number;
  cost: RedisCost;
}

export interface ClusterRunResult {
  variant: ClusterVariant;
  repeat: number;
  jobs: number;
  opsPerSec?: number;
  nodes?: NodeCost[];
  /** CPU (user + system) of all worker processes over the timed part. */
  workerCpuMicros?: number;
  /** Worker start (Nest app, connections, slot discovery) inside the timed part, per worker. */
  bootMs?: number[];
  /** (Redis + worker CPU) / elapsed: cores this run kept busy on average, to compare with the machine's. */
  coresBusy?: number;
  /** The same for the whole machine (/proc/stat): above `coresBusy` by what other processes (other tenants of a shared host) took. */
  machineCoresBusy?: number;
  error?: string;
}

export interface ClusterReport {
  masters: number[];
  namespaces: string[];
  loadAverage: number[];
  results: ClusterRunResult[];
}

/** A Redis node to observe: its admin connection (INFO, FLUSHALL, counts) and how Sluice connects to it. */
interface Node {
  name: string;
  port: number;
  admin: Redis;
}

interface Share {
  node: Node;
  namespace: string;
  jobs: number;
}

export async function runClusterScenario(single: LocalRedis, jobs: number, repeats: number): Promise<ClusterReport> {
  const pool = new WorkerPool();
  const admins: Redis[] = [];
  let cluster: LocalCluster | undefined;
  const teardown = onTeardown(async () => {
    await pool.kill();
    admins.forEach((a) => a.disconnect());
    await cluster?.stop();
  });
  try {
    // A long node timeout: a master starved of CPU by the workers must not be marked failed (no replicas: the cluster would go down).
    cluster = await startRedisCluster({ masters: 3, nodeTimeoutMs: 15_000 });
    const masters = cluster.nodes.filter((n) => n.role === 'master').map((n) => n.port);
    const kept = (redis: Redis) => (admins.push(redis), redis);
    const shards: Node[] = masters.map((port, i) => ({ name: `shard${i + 1}`, port, admin: kept(cluster!.connect(port)) }));
    const server: Node = { name: 'single', port: single.port, admin: kept(new Redis(single.url)) };
    const namespaces: string[] = [];
    for (const port of masters) namespaces.push(await namespaceOnShard(cluster, port, 'sluice', 'bench'));
    const onCluster = { cluster: cluster.seeds() };
    const split = (i: number) => Math.floor(jobs / 3) + (i < jobs % 3 ? 1 : 0);
    const plans: Record<ClusterVariant, { connection: QueueModuleOptions['connection']; observed: Node[]; shares: Share[] }> = {
      'single-1ns': { connection: { url: single.url }, observed: [server], shares: [{ node: server, namespace: namespaces[0], jobs }] },
      'cluster-1ns': { connection: onCluster, observed: shards, shares: [{ node: shards[0], namespace: namespaces[0], jobs }] },
      'cluster-3ns': {
        connection: onCluster,
        observed: shards,
        shares: shards.map((node, i) => ({ node, namespace: namespaces[i], jobs: split(i) })),
      },
    };
    const report: ClusterReport = { masters, namespaces, loadAverage: loadavg(), results: [] };
    console.log(
      `\nCluster: 3 masters on ${masters.join(', ')}; namespaces ${namespaces.join(', ')}; load average ${report.loadAverage.map((l) => l.toFixed(2)).join(' ')}`,
    );
    // Untimed: forks the workers and warms their JIT, so that repeat 1 does not pay for cold processes.
    for (const variant of CLUSTER_VARIANTS) {
      if (isStopping()) return report;
      const { connection, observed, shares } = plans[variant];
      const few = shares.map((share) => ({ ...share, jobs: Math.ceil(WARM_UP_JOBS / shares.length) }));
      const warm = await measure(pool, variant, 0, WARM_UP_JOBS, connection, observed, few);
      if (warm.error) console.log(`  ${variant.padEnd(19)} warm-up failed: ${warm.error}`);
    }
    for (let repeat = 1; repeat <= repeats; repeat++) {
      for (const variant of CLUSTER_VARIANTS) {
        if (isStopping()) return report;
        const { connection, observed, shares } = plans[variant];
        const result = await measure(pool, variant, repeat, jobs, connection, observed, shares);
        report.results.push(result);
        const shown = result.error ?? `${Math.round(result.opsPerSec!)} ops/s`;
        console.log(`  ${variant.padEnd(19)} #${repeat} sluice  ${shown}`);
      }
    }
    return report;
  } finally {
    await teardown();
  }
}

async function measure(
  pool: WorkerPool,
  variant: ClusterVariant,
  repeat: number,
  jobs: number,
  connection: QueueModuleOptions['connection'],
  observed: Node[],
  shares: Share[],
): Promise<ClusterRunResult> {
  const base = { variant, repeat, jobs };
  try {
    await Promise.all(observed.map((n) => n.admin.flushall())); // every run starts from empty
    const workers = await pool.take(shares.length);
    shares.forEach((share, i) => workers[i].send({ type: 'fill', connection, namespace: share.namespace, jobs: share.jobs }));
    await withTimeout(Promise.all(workers.map((w) => w.next('filled'))), `${variant} fill`);
    const before = await Promise.all(observed.map((n) => snapshot(n.admin)));
    const machineBefore = machineCpu();
    const started = performance.now();
    workers.forEach((w) => w.send({ type: 'go' }));
    const done = await withTimeout(Promise.all(workers.map((w) => w.next('done'))), `sluice ${variant}`);
    const elapsedMs = performance.now() - started;
    const machineAfter = machineCpu();
    const after = await Promise.all(observed.map((n) => snapshot(n.admin)));
    await withTimeout(Promise.all(workers.map((w) => w.next('closed'))), `${variant} worker close`);
    for (const share of shares) {
      const committed = await countRunsOn(share.node.admin, share.namespace, 'completed');
      if (committed !== share.jobs)
        return {
          ...base,
          error: `correctness check failed: ${committed} of ${share.jobs} jobs committed in ${share.namespace} on ${share.node.name}`,
        };
    }
    const nodes = observed.map((node, i) => {
      const mine = shares.filter((s) => s.node === node);
      return {
        node: node.name,
        port: node.port,
        namespaces: mine.map((s) => s.namespace),
        jobs: mine.reduce((a, s) => a + s.jobs, 0),
        cost: costBetween(before[i], after[i]),
      };
    });
    const workerCpuMicros = done.reduce((a, d) => a + d.cpuMicros, 0);
    const redisCpuMicros = nodes.reduce((a, n) => a + n.cost.cpuMicros, 0);
    return {
      ...base,
      opsPerSec: (jobs * 1000) / elapsedMs,
      nodes,
      workerCpuMicros,
      bootMs: done.map((d) => d.bootMs),
      coresBusy: (workerCpuMicros + redisCpuMicros) / (elapsedMs * 1000),
      machineCoresBusy: machineCoresBusy(machineBefore, machineAfter),
    };
  } catch (error) {
    await pool.kill(); // a worker may be stuck mid-run: the next run forks fresh ones
    return { ...base, error: (error as Error).message };
  }
}
