/**
 * `npm run bench [-- --scenario drain-c50 --jobs 50000 --repeats 3 --out file.json]`
 * Sluice against BullMQ and the Redis floor, same Redis, same process, interleaved per repeat.
 */
import Redis from 'ioredis';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { startRedisServer } from '../test/support/redis-server';
import { BenchSystem, DEFAULT_JOBS, Latency, SCENARIOS, ScenarioName } from './bench.types';
import { BullmqSystem } from './bullmq.system';
import { FloorSystem } from './floor.system';
import { costBetween, RedisCost, snapshot } from './redis.stats';
import { printTable } from './report';
import { SluiceSystem } from './sluice.system';

const RUN_TIMEOUT_MS = 120_000;

export interface RunResult {
  scenario: ScenarioName;
  system: string;
  repeat: number;
  jobs: number;
  opsPerSec?: number;
  latency?: Latency;
  cost?: RedisCost;
  note?: string;
  error?: string;
}

function parseArgs(argv: string[]) {
  const value = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const scenario = value('--scenario');
  if (scenario && !SCENARIOS.includes(scenario as ScenarioName)) throw new Error(`unknown scenario ${scenario}; one of ${SCENARIOS.join(', ')}`);
  return {
    scenarios: scenario ? [scenario as ScenarioName] : [...SCENARIOS],
    jobs: value('--jobs') ? Number(value('--jobs')) : undefined,
    repeats: Number(value('--repeats') ?? 3),
    out: value('--out') ?? join(__dirname, 'results', `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`),
  };
}

async function measure(system: BenchSystem, scenario: ScenarioName, jobs: number, repeat: number, url: string, admin: Redis): Promise<RunResult> {
  const base = { scenario, system: system.name, repeat, jobs };
  await admin.flushall(); // the benchmark's own private server: every run starts from empty
  let prepared;
  try {
    prepared = await system.prepare(scenario, jobs, url);
    const before = await snapshot(admin);
    const started = performance.now();
    const { latency } = await withTimeout(prepared.timed(), `${system.name} ${scenario}`);
    const elapsedMs = performance.now() - started;
    const cost = costBetween(before, await snapshot(admin));
    const committed = await prepared.committed();
    if (committed !== jobs) return { ...base, note: prepared.note, error: `correctness check failed: ${committed} of ${jobs} jobs committed` };
    return { ...base, note: prepared.note, opsPerSec: (jobs * 1000) / elapsedMs, latency, cost };
  } catch (error) {
    return { ...base, error: (error as Error).message };
  } finally {
    await prepared?.cleanup().catch(() => undefined);
  }
}

function withTimeout<T>(promise: Promise<T>, label: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${label} timed out after ${RUN_TIMEOUT_MS} ms`)), RUN_TIMEOUT_MS)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const redis = await startRedisServer();
  const admin = new Redis(redis.url);
  const systems: BenchSystem[] = [new SluiceSystem(), new BullmqSystem(), new FloorSystem()];
  const results: RunResult[] = [];
  const version = (await admin.info('server')).match(/redis_version:(\S+)/)?.[1];
  const machine = `${cpus().length} x ${cpus()[0]?.model.trim()}, Node ${process.version}, Redis ${version}`;
  console.log(`Sluice benchmark on ${machine}; ${args.repeats} repeats, systems interleaved\n`);
  try {
    for (const scenario of args.scenarios) {
      const jobs = args.jobs ?? DEFAULT_JOBS[scenario];
      for (let repeat = 1; repeat <= args.repeats; repeat++) {
        for (const system of systems) {
          const result = await measure(system, scenario, jobs, repeat, redis.url, admin);
          results.push(result);
          const shown = result.error ?? `${Math.round(result.opsPerSec!)} ops/s${result.latency ? `, mean ${result.latency.meanMs.toFixed(3)} ms` : ''}`;
          console.log(`  ${scenario.padEnd(19)} #${repeat} ${system.name.padEnd(7)} ${shown}`);
        }
      }
    }
  } finally {
    await admin.quit();
    await redis.stop();
  }
  printTable(results);
  mkdirSync(join(args.out, '..'), { recursive: true });
  writeFileSync(args.out, JSON.stringify({ machine, date: new Date().toISOString(), results }, null, 2));
  console.log(`\nJSON: ${args.out}`);
  process.exit(results.some((r) => r.error) ? 1 : 0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
