import type Redis from 'ioredis';

/** Server-side cost of a timed region: Redis CPU and commands, from INFO deltas. */
export interface RedisCost {
  cpuMicros: number;
  commands: number;
  /** Calls by command name, for the JSON report (where the cost is). */
  byCommand: Record<string, number>;
  /**
   * Microseconds spent executing, by command name (INFO commandstats `usec`; a script's includes
   * the commands it runs): what is left of `cpuMicros` is the server's networking and event loop.
   */
  usecByCommand: Record<string, number>;
}

interface Snapshot {
  cpuSeconds: number;
  calls: Record<string, number>;
  usec: Record<string, number>;
}

export async function snapshot(redis: Redis): Promise<Snapshot> {
  const [cpu, stats] = await Promise.all([redis.info('cpu'), redis.info('commandstats')]);
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? 0);
  const calls: Record<string, number> = {};
  const usec: Record<string, number> = {};
  for (const match of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    calls[match[1]] = Number(match[2]);
    usec[match[1]] = Number(match[3]);
  }
  return { cpuSeconds: field('used_cpu_user') + field('used_cpu_sys'), calls, usec };
}

/** The INFO calls themselves are excluded from the counts. */
export function costBetween(before: Snapshot, after: Snapshot): RedisCost {
  const byCommand: Record<string, number> = {};
  const usecByCommand: Record<string, number> = {};
  let commands = 0;
  for (const [name, calls] of Object.entries(after.calls)) {
    const delta = calls - (before.calls[name] ?? 0) - (name === 'info' ? 2 : 0);
    if (delta > 0) {
      byCommand[name] = delta;
      usecByCommand[name] = after.usec[name] - (before.usec[name] ?? 0);
      commands += delta;
    }
  }
  return { cpuMicros: Math.round((after.cpuSeconds - before.cpuSeconds) * 1e6), commands, byCommand, usecByCommand };
}
