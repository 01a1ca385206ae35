import type Redis from 'ioredis';
import { BenchSystem, Details, isMemory, Latency, PreparedRun, runTimeoutMs, ScenarioName, withTimeout } from './bench.types';
import { profiled } from './cpu.profile';
import { costBetween, RedisCost, snapshot } from './redis.stats';

export interface RunResult {
  scenario: ScenarioName;
  system: string;
  repeat: number;
  jobs: number;
  opsPerSec?: number;
  latency?: Latency;
  cost?: RedisCost;
  /**
   * CPU time (user + system, µs) of the measuring process during the timed part: the system's
   * client side (for a drain, the worker: its bootstrap, then its per-run JavaScript, GC and
   * socket writes). Divide by `jobs` for µs per run.
   */
  nodeCpuMicros?: number;
  /** The part of {@link nodeCpuMicros} spent in the kernel (socket writes and reads). */
  nodeSysMicros?: number;
  /** Scenario-specific figures (see bench.types `Details`). */
  details?: Details;
  note?: string;
  /** The system has no equivalent of the scenario: not run, not emulated; says why. */
  noEquivalent?: string;
  error?: string;
}

/**
 * One run of one system: FLUSHALL, pre-fill (untimed, except as the memory scenarios' enqueue
 * rate), the timed part (profiled into `profileDir` if given), the correctness count and the
 * Redis cost of the timed part. Runs in the system's own process (system.process.ts).
 */
export async function measure(
  system: BenchSystem,
  scenario: ScenarioName,
  jobs: number,
  repeat: number,
  url: string,
  admin: Redis,
  profileDir?: string,
): Promise<RunResult> {
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
    const cpuBefore = process.cpuUsage();
    const { latency, details } = await withTimeout(
      profiled(profileDir, `${scenario}-${system.name}-${repeat}`, () => prepared!.timed()),
      `${system.name} ${scenario}`,
      runTimeoutMs(jobs),
    );
    const elapsedMs = performance.now() - started;
    const cpu = process.cpuUsage(cpuBefore);
    const cost = costBetween(before, await snapshot(admin));
    const committed = await prepared.committed();
    if (committed !== jobs)
      return { ...base, note: prepared.note, error: `correctness check failed: ${committed} of ${jobs} jobs committed` };
    const probed = memory
      ? { enqueuePerSec, waitingBytesPerRun: waitingBytes / jobs, completedBytesPerRun: ((await usedMemory(admin)) - empty) / jobs }
      : prepared.probe
        ? await prepared.probe()
        : undefined;
    const all = details || probed ? { ...details, ...probed } : undefined;
    return {
      ...base,
      note: prepared.note,
      opsPerSec: (jobs * 1000) / elapsedMs,
      nodeCpuMicros: cpu.user + cpu.system,
      nodeSysMicros: cpu.system,
      latency,
      cost,
      ...(all && { details: all }),
    };
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
