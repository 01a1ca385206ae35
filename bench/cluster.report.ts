import { cpus } from 'node:os';
import type { ClusterReport, ClusterRunResult } from './cluster.scenario';
import { CLUSTER_VARIANTS } from './cluster.scenario';
import { fmt, median, printRows } from './report';

const machine = (runs: ClusterRunResult[]) => {
  const values = runs.flatMap((r) => (r.machineCoresBusy === undefined ? [] : [r.machineCoresBusy]));
  return values.length ? fmt(median(values), 2) : '-';
};

/**
 * One row per variant: ops/s best (median) and its ratio to single-1ns on best; Redis CPU per job
 * of each node that processed jobs (medians; an idle shard shows '-'), and of all observed nodes
 * together (idle shards' background CPU included); Redis commands per job per node; the worker
 * processes' CPU per job; cores kept busy by the run (Redis + workers CPU / wall time) and by the
 * whole machine.
 */
export function printClusterTable({ results, masters }: ClusterReport): void {
  const header = [
    'cluster scenario',
    'sluice ops/s best (median)',
    'vs single-1ns',
    'redis µs/job by node',
    'redis µs/job all nodes',
    'cmds/job by node',
    'worker µs/job',
    'cores busy run / machine',
  ];
  const rows = [header];
  const ok = (variant: string) => results.filter((r) => r.variant === variant && r.opsPerSec !== undefined);
  const best = (runs: ClusterRunResult[]) => (runs.length ? Math.max(...runs.map((r) => r.opsPerSec!)) : undefined);
  const baseline = best(ok('single-1ns'));
  for (const variant of CLUSTER_VARIANTS) {
    const runs = ok(variant);
    if (!runs.length) {
      rows.push([variant, 'error', '-', '-', '-', '-', '-', '-']);
      continue;
    }
    const top = best(runs)!;
    const perNode = (value: (n: NonNullable<ClusterRunResult['nodes']>[number]) => number) =>
      runs[0]
        .nodes!.map((node, i) => (node.jobs ? fmt(median(runs.map((r) => value(r.nodes![i]) / r.nodes![i].jobs)), 1) : '-'))
        .join(' · ');
    rows.push([
      variant,
      `${fmt(top)} (${fmt(median(runs.map((r) => r.opsPerSec!)))})`,
      baseline ? `${(top / baseline).toFixed(2)}x` : '-',
      perNode((n) => n.cost.cpuMicros),
      fmt(median(runs.map((r) => r.nodes!.reduce((a, n) => a + n.cost.cpuMicros, 0) / r.jobs)), 1),
      perNode((n) => n.cost.commands),
      fmt(median(runs.map((r) => r.workerCpuMicros! / r.jobs)), 1),
      `${fmt(median(runs.map((r) => r.coresBusy!)), 2)} / ${machine(runs)} of ${cpus().length}`,
    ]);
  }
  printRows(rows);
  console.log(
    `\nCluster notes:\n- by node: single-1ns on the plain redis-server; cluster-* on shard1 · shard2 · shard3 (masters ${masters.join(', ')}), one namespace per shard in cluster-3ns, shard1 only in cluster-1ns` +
      `\n- every variant runs one forked worker process per namespace (concurrency 50 each); cluster-3ns splits the same N jobs over 3 of them` +
      `\n- cores busy: run = (Redis CPU of the observed nodes + worker CPU) / wall time; machine = every process's (/proc/stat). Machine at its core count: CPU-bound,` +
      `\n  whatever the layout; machine well above run: other processes (a shared host's other tenants) took that much of the cores`,
  );
  const errors = results.filter((r) => r.error);
  if (errors.length) console.log(`\nCluster errors:\n${errors.map((r) => `- ${r.variant} #${r.repeat}: ${r.error}`).join('\n')}`);
}
