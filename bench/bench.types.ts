/**
 * The scenarios of `npm run bench` (see docs/performance.md). sleep-between-steps is last: its
 * runs are the only ones that suspend, and it leaves nothing behind that could slow the others.
 */
export const SCENARIOS = [
  'drain-c1',
  'drain-c50',
  'drain-c50-3steps',
  'drain-c50-10groups',
  'roundtrip',
  'roundtrip-c1',
  'roundtrip-apart',
  'enqueue-seq',
  'enqueue-c50',
  'enqueue-batch',
  'sleep-between-steps',
  'memory',
  'backlog',
  'first-claim',
] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

/**
 * Jobs per run when `--jobs` is not given: sized so a full run stays well under 10 minutes on 2 cores.
 * drain-c1 drains as many runs as drain-c50, so the commands per job of the two spread the same
 * fixed costs (worker start, ramp, tail) over the same number of runs.
 */
export const DEFAULT_JOBS: Record<ScenarioName, number> = {
  'drain-c1': 40_000,
  'drain-c50': 40_000,
  'drain-c50-3steps': 20_000,
  'drain-c50-10groups': 40_000,
  roundtrip: 3_000,
  'roundtrip-c1': 3_000,
  'roundtrip-apart': 3_000,
  'enqueue-seq': 8_000,
  'enqueue-c50': 40_000,
  'enqueue-batch': 40_000,
  'sleep-between-steps': 20_000,
  memory: 100_000,
  backlog: 1_000_000,
  'first-claim': 20,
};

/**
 * One run in flight, enqueue then await its result. `roundtrip-c1` gives the worker a concurrency
 * of 1 (the peers' workers run at 1 in both; Sluice's default is 10, and a saturated worker of 1
 * takes another path: see docs/performance.md, "The hot path, in round trips"). `roundtrip-apart` puts Sluice's
 * worker in a Nest app of its own beside the caller's, as a worker process apart from the
 * caller's would be: neither app starts the other's runs nor settles its waits in-process (see
 * LocalWorker, LocalWaits); the peers, which have no such shortcut, run roundtrip's setup.
 */
export function isRoundtrip(scenario: ScenarioName): boolean {
  return scenario === 'roundtrip' || scenario === 'roundtrip-c1' || scenario === 'roundtrip-apart';
}

/**
 * A drain at concurrency 50: the `drain-c50` scenarios, and `memory`, which is drain-c50 at
 * 100 000 runs measured for Redis memory per waiting run (after the pre-fill) and per completed
 * run (after the drain), each system with its default retention of finished jobs; `backlog` is
 * the same at 1 000 000 runs, its pre-fill timed too (enqueue rate): per-run memory equal to
 * `memory`'s says the cost stays flat as the backlog grows.
 */
export function isDrain(scenario: ScenarioName): boolean {
  return scenario.startsWith('drain') || isMemory(scenario);
}

/** The scenarios measured for Redis memory per waiting and per completed run. */
export function isMemory(scenario: ScenarioName): boolean {
  return scenario === 'memory' || scenario === 'backlog';
}

/**
 * Untimed round trips before a round-trip scenario's timed ones, one after the other, up to
 * {@link ROUNDTRIP_WARMUP_RUNS} or {@link ROUNDTRIP_WARMUP_MS}, whichever comes first: the timed
 * part measures each system warm. A process's first few thousand round trips run code V8 has not
 * optimized yet: Sluice's mean over its first 3,000 was 0.45 ms, over the next ones 0.24–0.26, and
 * a system with more code on the path pays that for longer. Resolves how many ran (each system's
 * `committed` leaves them out).
 */
export async function warmUpRoundTrips(once: (i: number) => Promise<unknown>): Promise<number> {
  const until = performance.now() + ROUNDTRIP_WARMUP_MS;
  let runs = 0;
  while (runs < ROUNDTRIP_WARMUP_RUNS && (runs === 0 || performance.now() < until)) await once(-++runs);
  return runs;
}
export const ROUNDTRIP_WARMUP_RUNS = 3_000;
export const ROUNDTRIP_WARMUP_MS = 3_000;

/** `jobs` round trips one after the other (enqueue one job, await its result), each timed. */
export async function timeRoundTrips(jobs: number, once: (i: number) => Promise<unknown>): Promise<{ latency: Latency }> {
  const samples: number[] = [];
  for (let i = 0; i < jobs; i++) {
    const started = performance.now();
    await once(i);
    samples.push(performance.now() - started);
  }
  return { latency: latencyOf(samples) };
}

/** A drain's finish line: `all` resolves once `tick` (a completion event) was called `jobs` times. */
export function completionCounter(jobs: number): { tick: () => void; all: Promise<void> } {
  const done = deferred();
  let completed = 0;
  return { tick: () => void (++completed === jobs && done.resolve()), all: done.promise };
}

/**
 * `first-claim`, `jobs` times: one job waits; the clock runs from starting a worker (for Sluice,
 * bootstrapping the worker app, which starts its workers and runs migrate()) to that job's result.
 * Each sample is one cold worker start.
 */
export async function timeFirstClaims<J>(
  jobs: number,
  enqueue: (i: number) => Promise<J>,
  startWorkerFor: (job: J) => Promise<() => Promise<void>>,
): Promise<{ latency: Latency }> {
  const samples: number[] = [];
  for (let i = 0; i < jobs; i++) {
    const job = await enqueue(i);
    const started = performance.now();
    // Resolves once the job's result is in; returns how to stop that worker (untimed).
    const stop = await startWorkerFor(job);
    samples.push(performance.now() - started);
    await stop();
  }
  return { latency: latencyOf(samples) };
}

export interface Latency {
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
}

/** Figures a scenario measures beyond ops/s (named, numeric), kept in the JSON and printed by its own section of the report. */
export type Details = Record<string, number>;

/** One prepared run: `timed` is the measured part; `completed` counts finished jobs in Redis afterwards. */
export interface PreparedRun {
  timed(): Promise<{ latency?: Latency; details?: Details }>;
  /** How many jobs Redis holds as done (completed / enqueued) after the timed part. */
  committed(): Promise<number>;
  /** Untimed measurements after the timed part and its correctness check (e.g. memory), merged into `details`. */
  probe?(): Promise<Details>;
  cleanup(): Promise<void>;
  /** Says how this system implements the scenario where it differs from the others. */
  note?: string;
}

export interface BenchSystem {
  readonly name: string;
  /**
   * Why this system has no equivalent of `scenario` (printed in its cell of the report), or
   * undefined if it has one. Such a scenario is not emulated: `prepare` is never called for it.
   */
  noEquivalent?(scenario: ScenarioName): string | undefined;
  /** Jobs per run of `scenario` for this system when not the scenario's `jobs` (a much slower system runs fewer; rates are compared). */
  jobsFor?(scenario: ScenarioName, jobs: number): number;
  /** Why this system cannot be measured on this machine (a server it needs is missing), or undefined: it is then left out of the run, with that line. */
  unavailable?(): Promise<string | undefined>;
  prepare(scenario: ScenarioName, jobs: number, redisUrl: string): Promise<PreparedRun>;
}

export function latencyOf(samplesMs: number[]): Latency {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { meanMs: sorted.reduce((a, b) => a + b, 0) / sorted.length, p50Ms: at(0.5), p99Ms: at(0.99) };
}

/** Runs `count` async operations with at most `inFlight` at a time. */
export async function inParallel(count: number, inFlight: number, op: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) await op(next++);
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, count) }, lane));
}

/** Runs a bulk enqueue (`enqueue-batch`, and the drains' untimed pre-fill) puts in one call. */
export const BATCH_SIZE = 1_000;

/** `jobs` enqueued in bulk calls of {@link BATCH_SIZE}, one call after the other. */
export async function inBatches(jobs: number, enqueue: (from: number, count: number) => Promise<unknown>): Promise<void> {
  for (let from = 0; from < jobs; from += BATCH_SIZE) await enqueue(from, Math.min(BATCH_SIZE, jobs - from));
}

/** A promise resolved from outside, e.g. when a completion counter reaches its target. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Bound on one timed run: a hung run is reported as an error, not waited for. */
export const RUN_TIMEOUT_MS = 120_000;

/**
 * The bound for a timed run of `jobs`: {@link RUN_TIMEOUT_MS}, or 1 ms per job if longer, so a
 * slow but moving system is measured rather than cut off (BullMQ drained the 1 000 000-run backlog
 * at about 6 300 runs/s on a slow day: 160 s); below 1 000 runs/s a run counts as hung.
 */
export const runTimeoutMs = (jobs: number): number => Math.max(RUN_TIMEOUT_MS, jobs);

export function withTimeout<T>(promise: Promise<T>, label: string, ms = RUN_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${label} timed out after ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
