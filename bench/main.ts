/**
 * `npm run bench [-- --scenario drain-c50 --jobs 50000 --repeats 3 --out file.json]`
 * Sluice against its peers and the Redis floor, same Redis, interleaved per repeat, each system
 * measured in a process of its own (see system.process.ts);
 * then (about 30 s more) Sluice on a local 3-master Redis Cluster, see cluster.scenario.ts.
 * Only the cluster part: `npm run bench -- --scenario cluster [--jobs 40000 --repeats 3]`;
 * only some systems: `--systems sluice,bullmq`; Sluice with compact run records: `--compact-records`;
 * a CPU profile of each timed part: `--cpu-profile <dir>`;
 * everything but it: `npm run bench -- --no-cluster`. Ctrl-C stops every server and worker started.
 * Durable sleeps (Sluice only, BullMQ has no equivalent): `npm run bench -- --scenario sleep-between-steps`.
 */
import Redis from 'ioredis';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { startRedisServer } from '../test/support/redis-server';
import { BenchSystem, DEFAULT_JOBS, SCENARIOS, ScenarioName } from './bench.types';
import { printClusterTable } from './cluster.report';
import { CLUSTER_JOBS, CLUSTER_SCENARIO, ClusterReport, runClusterScenario } from './cluster.scenario';
import type { RunResult } from './measure';
import { printDetails, printDurablePeer, printMemory, printNodeCpu, printTable } from './report';
import type { FromSystem, ToSystem } from './system.process';
import { allSystems } from './systems';
import { isStopping, onTeardown } from './teardown';
import { forkBenchChild, WorkerProcess } from './worker.pool';

function parseArgs(argv: string[]) {
  const value = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const scenario = value('--scenario');
  const cluster = scenario === CLUSTER_SCENARIO;
  if (scenario && !cluster && !SCENARIOS.includes(scenario as ScenarioName))
    throw new Error(`unknown scenario ${scenario}; one of ${[...SCENARIOS, CLUSTER_SCENARIO].join(', ')}`);
  return {
    scenarios: cluster ? [] : scenario ? [scenario as ScenarioName] : [...SCENARIOS],
    cluster: cluster || (!scenario && !argv.includes('--no-cluster')),
    jobs: value('--jobs') ? Number(value('--jobs')) : undefined,
    repeats: Number(value('--repeats') ?? 3),
    /** Only these systems (comma-separated names), e.g. to profile one: `--systems sluice`. */
    systems: value('--systems')?.split(','),
    /** Sluice stores compact run records (option compactRunRecords; off by default). */
    compactRecords: argv.includes('--compact-records'),
    /** A CPU profile of each run's timed part, written to this directory. */
    cpuProfile: value('--cpu-profile'),
    out: value('--out') ?? join(__dirname, 'results', `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`),
  };
}

function rotated<T>(items: T[], by: number): T[] {
  const start = by % items.length;
  return [...items.slice(start), ...items.slice(0, start)];
}

/**
 * One child process per system (system.process.ts), forked at its first run and reused for the
 * repeats of a scenario (killed after each scenario); a run that failed leaves its process in an
 * unknown state (workers still running), so it is killed and the system's next run gets a fresh one.
 */
class SystemProcesses {
  private readonly processes = new Map<string, WorkerProcess<ToSystem, FromSystem>>();

  async measure(message: Omit<ToSystem, 'type'>): Promise<RunResult> {
    let child = this.processes.get(message.system);
    if (!child) this.processes.set(message.system, (child = new WorkerProcess<ToSystem, FromSystem>(forkBenchChild('system.process.ts'))));
    const base = { scenario: message.scenario, system: message.system, repeat: message.repeat, jobs: message.jobs };
    let result: RunResult;
    try {
      child.send({ type: 'measure', ...message });
      result = (await child.next('measured')).result;
    } catch (error) {
      result = { ...base, error: (error as Error).message };
    }
    if (result.error) await this.kill(message.system);
    return result;
  }

  async killAll(): Promise<void> {
    await Promise.all([...this.processes.keys()].map((name) => this.kill(name)));
  }

  private async kill(name: string): Promise<void> {
    const child = this.processes.get(name);
    this.processes.delete(name);
    await child?.kill();
  }
}

/** The systems this machine can measure: one that needs a server it lacks (DBOS without PostgreSQL) is left out, with a line saying so. */
async function availableOf(systems: BenchSystem[]): Promise<BenchSystem[]> {
  const reasons = await Promise.all(systems.map(async (system) => system.unavailable?.()));
  reasons.forEach((reason) => reason && console.log(reason));
  return systems.filter((_, i) => !reasons[i]);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const profileDir = args.cpuProfile;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const redis = await startRedisServer();
  const stopRedis = onTeardown(() => redis.stop());
  const children = new SystemProcesses();
  const stopChildren = onTeardown(() => children.killAll());
  const admin = new Redis(redis.url);
  const systems = await availableOf(allSystems().filter((system) => !args.systems || args.systems.includes(system.name)));
  const results: RunResult[] = [];
  let cluster: ClusterReport | undefined;
  const version = (await admin.info('server')).match(/redis_version:(\S+)/)?.[1];
  const machine = `${cpus().length} x ${cpus()[0]?.model.trim()}, Node ${process.version}, Redis ${version}`;
  console.log(`Sluice benchmark on ${machine}; ${args.repeats} repeats, systems interleaved\n`);
  try {
    for (const scenario of args.scenarios) {
      const jobs = args.jobs ?? DEFAULT_JOBS[scenario];
      for (let repeat = 1; repeat <= args.repeats; repeat++) {
        // Each repeat starts with the next system: a run's place in the order (the first after a
        // FLUSHALL, the one after the heaviest) must not favour any system every time.
        for (const system of rotated(systems, repeat - 1)) {
          if (isStopping()) break;
          const noEquivalent = system.noEquivalent?.(scenario);
          // Not emulated: reported as such, once per scenario.
          if (noEquivalent && repeat > 1) continue;
          const systemJobs = system.jobsFor?.(scenario, jobs) ?? jobs;
          const result = noEquivalent
            ? { scenario, system: system.name, repeat, jobs: systemJobs, noEquivalent }
            : await children.measure({
                system: system.name,
                scenario,
                jobs: systemJobs,
                repeat,
                url: redis.url,
                profileDir,
                compactRecords: args.compactRecords,
              });
          results.push(result);
          const shown =
            result.noEquivalent ??
            result.error ??
            `${Math.round(result.opsPerSec!)} ops/s${result.latency ? `, mean ${result.latency.meanMs.toFixed(3)} ms` : ''}`;
          console.log(`  ${scenario.padEnd(19)} #${repeat} ${system.name.padEnd(7)} ${shown}`);
        }
      }
      // The next scenario starts each system in a fresh process: none inherits the heap, JIT state
      // and garbage of the scenarios before it (first-claim, a cold start, ran after a million-run backlog).
      await children.killAll();
    }
    if (args.cluster && !isStopping()) cluster = await runClusterScenario(redis, args.jobs ?? CLUSTER_JOBS, args.repeats);
  } finally {
    await stopChildren();
    await admin.quit();
    await stopRedis();
  }
  if (isStopping()) return; // the signal handler exits once its cleanups are done
  if (results.length) {
    printTable(results);
    printNodeCpu(results);
    printDetails(results);
    printMemory(results);
    printDurablePeer(results);
  }
  if (cluster) printClusterTable(cluster);
  mkdirSync(join(args.out, '..'), { recursive: true });
  writeFileSync(args.out, JSON.stringify({ machine, date: new Date().toISOString(), results, cluster }, null, 2));
  console.log(`\nJSON: ${args.out}`);
  process.exit(results.some((r) => r.error) || cluster?.results.some((r) => r.error) ? 1 : 0);
}

main().catch((error) => {
  if (isStopping()) return; // an error of the teardown itself: the signal handler exits once it is done
  console.error(error);
  process.exit(1);
});
