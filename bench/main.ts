/**
 * `npm run bench [-- --scenario drain-c50 --jobs 50000 --repeats 3 --out file.json]`
 * Sluice against BullMQ and the Redis floor, same Redis, same process, interleaved per repeat;
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
import { BenchSystem, DEFAULT_JOBS, Details, isMemory, Latency, PreparedRun, SCENARIOS, ScenarioName, withTimeout } from './bench.types';
import { BullmqSystem } from './bullmq.system';
import { BeeQueueSystem } from './beequeue.system';
import { GroupmqSystem } from './groupmq.system';
import { printClusterTable } from './cluster.report';
import { CLUSTER_JOBS, CLUSTER_SCENARIO, ClusterReport, runClusterScenario } from './cluster.scenario';
import { FloorSystem } from './floor.system';
import { costBetween, RedisCost, snapshot } from './redis.stats';
import { profiled } from './cpu.profile';
import { printDetails, printMemory, printTable } from './report';
import { extraSluiceOptions, SluiceSystem } from './sluice.system';
import { isStopping, onTeardown } from './teardown';

export interface RunResult {
  scenario: ScenarioName;
  system: string;
  repeat: number;
  jobs: number;
  opsPerSec?: number;
  latency?: Latency;
  cost?: RedisCost;
  /** Scenario-specific figures (see bench.types `Details`). */
  details?: Details;
  note?: string;
  /** The system has no equivalent of the scenario: not run, not emulated; says why. */
  noEquivalent?: string;
  error?: string;
}

function parseArgs(argv: string[]) {
  const value = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const scenario = value('--scenario');
  const cluster = scenario === CLUSTER_SCENARIO;
  if (scenario && !cluster && !SCENARIOS.includes(scenario as ScenarioName)) throw new Error(`unknown scenario ${scenario}; one of ${[...SCENARIOS, CLUSTER_SCENARIO].join(', ')}`);
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

/** Set by `--cpu-profile <dir>`: each run's timed part is profiled there (see cpu.profile.ts). */
let profileDir: string | undefined;

function rotated<T>(items: T[], by: number): T[] {
  const start = by % items.length;
  return [...items.slice(start), ...items.slice(0, start)];
}

async function measure(system: BenchSystem, scenario: ScenarioName, jobs: number, repeat: number, url: string, admin: Redis): Promise<RunResult> {
  const base = { scenario, system: system.name, repeat, jobs };
  await admin.flushall(); // the benchmark's own private server: every run starts from empty
  let prepared: PreparedRun | undefined;
  try {
    const memory = isMemory(scenario);
    const empty = memory ? await usedMemory(admin) : 0;
    const prefillStarted = performance.now();
    prepared = await system.prepare(scenario, jobs, url);
    // For the memory scenarios the pre-fill (the systems' bulk enqueue) is a figure of its own.
    const enqueuePerSec = (jobs * 1000) / (performance.now() - prefillStarted);
    const waitingBytes = memory ? (await usedMemory(admin)) - empty : 0;
    const before = await snapshot(admin);
    const started = performance.now();
    const { latency, details } = await withTimeout(profiled(profileDir, `${scenario}-${system.name}-${repeat}`, () => prepared!.timed()), `${system.name} ${scenario}`);
    const elapsedMs = performance.now() - started;
    const cost = costBetween(before, await snapshot(admin));
    const committed = await prepared.committed();
    if (committed !== jobs) return { ...base, note: prepared.note, error: `correctness check failed: ${committed} of ${jobs} jobs committed` };
    const probed = memory
      ? { enqueuePerSec, waitingBytesPerRun: waitingBytes / jobs, completedBytesPerRun: ((await usedMemory(admin)) - empty) / jobs }
      : prepared.probe
        ? await prepared.probe()
        : undefined;
    const all = details || probed ? { ...details, ...probed } : undefined;
    return { ...base, note: prepared.note, opsPerSec: (jobs * 1000) / elapsedMs, latency, cost, ...(all && { details: all }) };
  } catch (error) {
    return { ...base, error: (error as Error).message };
  } finally {
    await prepared?.cleanup().catch(() => undefined);
  }
}

/** Redis `used_memory`, in bytes. */
async function usedMemory(admin: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1] ?? 0);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.compactRecords) extraSluiceOptions.compactRunRecords = true;
  profileDir = args.cpuProfile;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const redis = await startRedisServer();
  const stopRedis = onTeardown(() => redis.stop());
  const admin = new Redis(redis.url);
  const systems: BenchSystem[] = [new SluiceSystem(), new BullmqSystem(), new BeeQueueSystem(), new GroupmqSystem(), new FloorSystem()].filter((system) => !args.systems || args.systems.includes(system.name));
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
          const result = noEquivalent ? { scenario, system: system.name, repeat, jobs, noEquivalent } : await measure(system, scenario, jobs, repeat, redis.url, admin);
          results.push(result);
          const shown = result.noEquivalent ?? result.error ?? `${Math.round(result.opsPerSec!)} ops/s${result.latency ? `, mean ${result.latency.meanMs.toFixed(3)} ms` : ''}`;
          console.log(`  ${scenario.padEnd(19)} #${repeat} ${system.name.padEnd(7)} ${shown}`);
        }
      }
    }
    if (args.cluster && !isStopping()) cluster = await runClusterScenario(redis, args.jobs ?? CLUSTER_JOBS, args.repeats);
  } finally {
    await admin.quit();
    await stopRedis();
  }
  if (isStopping()) return; // the signal handler exits once its cleanups are done
  if (results.length) {
    printTable(results);
    printDetails(results);
    printMemory(results);
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
