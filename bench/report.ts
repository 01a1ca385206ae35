import type { RunResult } from './measure';

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

interface Summary {
  best: number;
  median: number;
  latencyMs?: number;
  cpuPerJob: number;
  cmdsPerJob: number;
  note?: string;
}

/** Best and median over the successful repeats of one scenario and system. */
function summarise(results: RunResult[]): Summary | undefined {
  const ok = results.filter((r) => r.opsPerSec !== undefined);
  if (!ok.length) return undefined;
  const best = ok.reduce((a, b) => (b.opsPerSec! > a.opsPerSec! ? b : a));
  return {
    best: best.opsPerSec!,
    median: median(ok.map((r) => r.opsPerSec!)),
    latencyMs: best.latency ? median(ok.map((r) => r.latency!.meanMs)) : undefined,
    cpuPerJob: median(ok.map((r) => r.cost!.cpuMicros / r.jobs)),
    cmdsPerJob: median(ok.map((r) => r.cost!.commands / r.jobs)),
    note: ok[0].note,
  };
}

export const fmt = (n: number | undefined, digits = 0) =>
  n === undefined ? '-' : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** The queues Sluice is measured against, in the table's column order; `floor` is a raw-Redis floor, not a peer. */
const PEERS = ['bullmq', 'beequeue', 'groupmq'];

/** Prints one row per scenario: ops/s best (median) per system, ratios on best (to each peer and the best peer), Redis µs and commands per job. */
export function printTable(results: RunResult[]): void {
  const scenarios = [...new Set(results.map((r) => r.scenario))];
  const systems = ['sluice', ...PEERS, 'floor'];
  const short = (system: string) => ({ sluice: 'S', bullmq: 'B', beequeue: 'bq', groupmq: 'g' })[system] ?? system;
  const header = [
    'scenario',
    'sluice ops/s best (median)',
    ...PEERS,
    'floor',
    ...PEERS.map((peer) => `sluice/${peer}`),
    'sluice/best peer',
    'sluice/floor',
    // One real column per system (a cell holding ' | ' broke the Markdown table's column count).
    ...systems.slice(0, -1).map((system) => `redis µs/job ${short(system)}`),
    ...systems.slice(0, -1).map((system) => `cmds/job ${short(system)}`),
  ];
  const rows = [header];
  const notes = new Set<string>();
  for (const scenario of scenarios) {
    const summaries = new Map(
      systems.map((system) => [system, summarise(results.filter((r) => r.scenario === scenario && r.system === system))]),
    );
    summaries.forEach((x) => x?.note && notes.add(`${scenario}: ${x.note}`));
    // A system without an equivalent of the scenario was not run (not emulated): said so, not 'error'.
    const missing = (system: string) => results.find((r) => r.scenario === scenario && r.system === system && r.noEquivalent);
    for (const system of systems) {
      const none = missing(system);
      if (none) notes.add(`${scenario}: ${none.noEquivalent}`);
    }
    const cell = (system: string) => {
      const x = summaries.get(system);
      if (x) return `${fmt(x.best)} (${fmt(x.median)})${x.latencyMs !== undefined ? ` ${fmt(x.latencyMs, 3)} ms` : ''}`;
      return missing(system) ? 'no equivalent' : results.some((r) => r.scenario === scenario && r.system === system) ? 'error' : '-';
    };
    const s = summaries.get('sluice');
    // first-claim's ops/s include stopping each worker: its ratios compare mean latencies instead (peer ms / Sluice ms).
    const byLatency = scenario === 'first-claim';
    const ratio = (c?: Summary) => (s && c ? `${(byLatency ? c.latencyMs! / s.latencyMs! : s.best / c.best).toFixed(2)}x` : '-');
    const peers = PEERS.map((peer) => summaries.get(peer)).filter((x): x is Summary => x !== undefined);
    const bestPeer = peers.length
      ? peers.reduce((a, b) => ((byLatency ? b.latencyMs! < a.latencyMs! : b.best > a.best) ? b : a))
      : undefined;
    const measured = systems.slice(0, -1).map((system) => summaries.get(system));
    rows.push([
      scenario,
      cell('sluice'),
      ...PEERS.map(cell),
      cell('floor'),
      ...PEERS.map((peer) => ratio(summaries.get(peer))),
      ratio(bestPeer),
      ratio(summaries.get('floor')),
      ...measured.map((x) => fmt(x?.cpuPerJob, 1)),
      ...measured.map((x) => fmt(x?.cmdsPerJob, 1)),
    ]);
  }
  printRows(rows);
  if (notes.size) console.log(`\nNotes:\n${[...notes].map((n) => `- ${n}`).join('\n')}`);
  const errors = results.filter((r) => r.error);
  if (errors.length) console.log(`\nErrors:\n${errors.map((r) => `- ${r.scenario} ${r.system} #${r.repeat}: ${r.error}`).join('\n')}`);
}

/**
 * Node CPU per job (the measuring process's user + system time over the timed part, median over
 * the repeats), per scenario and system, and Sluice's against the lowest peer's: the client side's
 * cost, which the Redis columns of {@link printTable} leave out. For a drain that process is the
 * worker; for a round trip, producer and worker; for first-claim, a worker app's whole boot, claim
 * and close per job.
 */
export function printNodeCpu(results: RunResult[]): void {
  const scenarios = [...new Set(results.map((r) => r.scenario))];
  const systems = ['sluice', ...PEERS];
  const perJob = (scenario: string, system: string) => {
    const ok = results.filter(
      (r) => r.scenario === scenario && r.system === system && r.opsPerSec !== undefined && r.nodeCpuMicros !== undefined,
    );
    return ok.length ? median(ok.map((r) => r.nodeCpuMicros! / r.jobs)) : undefined;
  };
  const rows = [['node µs/job', ...systems, 'sluice/lowest peer']];
  for (const scenario of scenarios) {
    const [sluice, ...peers] = systems.map((system) => perJob(scenario, system));
    const measured = peers.filter((x): x is number => x !== undefined);
    const lowest = measured.length ? Math.min(...measured) : undefined;
    if (sluice === undefined && lowest === undefined) continue;
    const ratio = sluice !== undefined && lowest ? `${(sluice / lowest).toFixed(2)}x` : '-';
    rows.push([scenario, fmt(sluice, 1), ...peers.map((x) => fmt(x, 1)), ratio]);
  }
  if (rows.length === 1) return;
  console.log(
    '\nNode CPU per job (process.cpuUsage of the measuring process over the timed part, median of the repeats; below 1.00x: less than the lowest peer):',
  );
  printRows(rows);
}

/**
 * Durable 3-step runs against DBOS (a workflow engine on PostgreSQL, outside the Redis table):
 * Sluice's and DBOS's drain-c50-3steps, best (median), and the ratio on best.
 */
export function printDurablePeer(results: RunResult[]): void {
  const of = (system: string) => summarise(results.filter((r) => r.scenario === 'drain-c50-3steps' && r.system === system));
  const sluice = of('sluice');
  const dbos = of('dbos');
  if (!sluice || !dbos) return;
  const jobs = (system: string) => results.find((r) => r.scenario === 'drain-c50-3steps' && r.system === system)!.jobs;
  console.log('\nDurable 3-step runs against DBOS (drain-c50-3steps; DBOS on PostgreSQL, so no Redis figures):');
  printRows([
    ['system', 'runs per repeat', 'ops/s best (median)', 'sluice/dbos'],
    ['sluice', fmt(jobs('sluice')), `${fmt(sluice.best)} (${fmt(sluice.median)})`, `${(sluice.best / dbos.best).toFixed(1)}x`],
    ['dbos', fmt(jobs('dbos')), `${fmt(dbos.best)} (${fmt(dbos.median)})`, '-'],
  ]);
  if (dbos.note) console.log(`- ${dbos.note}`);
}

/** A Markdown table, the first row being the header. */
export function printRows(rows: string[][]): void {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  console.log('');
  rows.forEach((row, i) => {
    console.log(`| ${row.map((c, k) => c.padEnd(widths[k])).join(' | ')} |`);
    if (i === 0) console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  });
}

/**
 * The scenarios' own figures (RunResult.details), one row per repeat. So far only
 * sleep-between-steps has some: its phases, its throughput without the time the worker sat idle
 * waiting for the sleep, and Redis memory per sleeping run (see sleep.scenario.ts).
 */
export function printDetails(results: RunResult[]): void {
  const sleep = results.filter((r) => r.scenario === 'sleep-between-steps' && r.details);
  if (!sleep.length) return;
  const d = (r: RunResult, key: string, digits = 0) => fmt(r.details![key], digits);
  const rows = [
    [
      'sleep-between-steps',
      'runs',
      'runs/s end to end',
      'runs/s excl. idle',
      'enqueue ms',
      'all asleep at ms',
      'first wake ms',
      'idle ms',
      'last wake → done ms',
      'total ms',
      'redis B / sleeping run',
      'MEMORY USAGE run hash B',
    ],
  ];
  for (const r of sleep) {
    rows.push([
      `${r.system} #${r.repeat}`,
      fmt(r.jobs),
      d(r, 'runsPerSec'),
      d(r, 'runsPerSecExclIdle'),
      d(r, 'enqueueMs'),
      d(r, 'allAsleepMs'),
      d(r, 'firstWakeMs'),
      d(r, 'idleMs'),
      d(r, 'lastWakeToDoneMs'),
      d(r, 'totalMs'),
      d(r, 'redisBytesPerSleepingRun'),
      d(r, 'sleepingRunHashBytes'),
    ]);
  }
  printRows(rows);
  const none = results.filter((r) => r.scenario === 'sleep-between-steps' && r.noEquivalent).map((r) => `${r.system}: no equivalent`);
  console.log(
    [
      `Each run: a step, ctx.sleep 1 s, a step. End to end = runs / (first enqueue → last completion event), the sleep included`,
      `(the table above times the same span around the harness's call, a few ms more).`,
      `Excl. idle subtracts only the time the worker had nothing to do (all runs asleep, none woken yet), not a flat 1 s:`,
      `once putting every run to sleep takes over 1 s, the first wakes overlap that work. Memory: an untimed probe with all`,
      `runs asleep at once (10-minute sleep): Redis used_memory delta / runs, and MEMORY USAGE of one sleeping run's hash.`,
      ...(none.length ? [`${none.join('; ')} (not emulated).`] : []),
    ].join('\n'),
  );
}

/** The `memory` scenario's figures: Redis `used_memory` per run after the pre-fill (waiting) and after the drain (completed, each system's default retention). */
export function printMemory(results: RunResult[]): void {
  const memory = results.filter((r) => (r.scenario === 'memory' || r.scenario === 'backlog') && r.details);
  if (!memory.length) return;
  const rows = [
    ['memory / backlog', 'runs', 'bulk enqueue runs/s (setup incl.)', 'drain runs/s', 'redis B / waiting run', 'redis B / completed run'],
  ];
  for (const r of memory) {
    rows.push([
      `${r.scenario} ${r.system} #${r.repeat}`,
      fmt(r.jobs),
      fmt(r.details!.enqueuePerSec),
      fmt(r.opsPerSec),
      fmt(r.details!.waitingBytesPerRun),
      fmt(r.details!.completedBytesPerRun),
    ]);
  }
  printRows(rows);
  console.log(
    [
      'used_memory delta over an empty server / runs: after enqueueing them all (bulk: enqueueMany / addBulk / saveAll / 50 adds in flight), and after the drain at concurrency 50.',
      'Finished jobs as each system keeps them by default: Sluice for resultTtlMs (24 h), BullMQ and bee-queue until removed;',
      'groupmq keeps none by default: the benchmark keeps them all (keepCompleted) to count them.',
    ].join('\n'),
  );
}
