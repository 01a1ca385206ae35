import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';

/** CPU time of the whole machine (every process, every tenant of a shared host), in jiffies, from /proc/stat. */
export interface MachineCpu {
  busy: number;
  total: number;
}

/** Undefined where /proc/stat does not exist (not Linux). */
export function machineCpu(): MachineCpu | undefined {
  try {
    // cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest is counted in user already)
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
    const total = fields.reduce((a, b) => a + b, 0);
    return { busy: total - fields[3] - fields[4], total };
  } catch {
    return undefined;
  }
}

/** Cores the whole machine kept busy on average between two readings. */
export function machineCoresBusy(before: MachineCpu | undefined, after: MachineCpu | undefined): number | undefined {
  if (!before || !after || after.total === before.total) return undefined;
  return ((after.busy - before.busy) / (after.total - before.total)) * cpus().length;
}
