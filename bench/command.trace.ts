/**
 * What one run costs Redis, command by command: a drain (or round trips) of Sluice alone on a
 * private redis-server with MONITOR on, printed as script calls per run and, per script, the
 * commands it ran per run.
 *
 * `npx ts-node --transpile-only bench/command.trace.ts [--scenario drain-c1|roundtrip|roundtrip-c1] [--jobs 2000]`
 *
 * MONITOR slows Redis down, so this counts and never times. The counts are of the steady state:
 * the first and last 10 % of completions are left out (boot, the tail's parking). A round-trip
 * scenario also prints one round trip from the middle, command by command, each with its
 * connection and its time (Redis's clock, relative to the enqueue) — the order of events, not a
 * timing: MONITOR itself stretches the gaps.
 */
import Redis from 'ioredis';
import { startRedisServer } from '../test/support/redis-server';
import { isDrain, isRoundtrip, type ScenarioName } from './bench.types';
import { SluiceSystem } from './sluice.system';

interface Trace {
  /** Per script: how many calls. */
  calls: Map<string, number>;
  /** Per script: per command its Lua ran, how many. */
  inside: Map<string, Map<string, number>>;
  /** Commands sent outside any script. */
  direct: Map<string, number>;
}

const bump = (map: Map<string, number>, key: string, by = 1) => map.set(key, (map.get(key) ?? 0) + by);

/** Reads a MONITOR line: `<time> [<db> <client>] "<command>" "<arg>" …`; a script's own commands have client `lua`. */
function parseLine(line: string): { fromLua: boolean; command: string; first?: string } | undefined {
  const match = /^\S+ \[\d+ (\S+)\] "([^"]*)"(?: "([^"]*)")?/.exec(line);
  if (!match) return undefined;
  return { fromLua: match[1] === 'lua', command: match[2].toLowerCase(), first: match[3] };
}

/** Counts the window's commands into `trace`; returns the runs that finished in it (a finish sets its record's retention). */
function record(trace: Trace, lines: string[]): number {
  let script: string | undefined;
  let finished = 0;
  for (const line of lines) {
    const parsed = parseLine(line);
    if (!parsed) continue;
    if (parsed.fromLua) {
      if (parsed.command === 'pexpire' && parsed.first?.includes(':run:')) finished++;
      if (script) bump(trace.inside.get(script) ?? trace.inside.set(script, new Map()).get(script)!, parsed.command);
      continue;
    }
    if (parsed.command === 'fcall' || parsed.command === 'evalsha' || parsed.command === 'eval') {
      // A library function is named sluice_<library hash>_<script>.
      script = parsed.command === 'fcall' ? parsed.first?.replace(/^sluice_[0-9a-f]+_/, '') : 'eval';
      bump(trace.calls, script ?? '?');
      continue;
    }
    script = undefined;
    bump(trace.direct, parsed.command);
  }
  return finished;
}

function print(trace: Trace, runs: number): void {
  const perRun = (n: number) => (n / runs).toFixed(2).padStart(7);
  let total = 0;
  for (const [script, calls] of [...trace.calls].sort((a, b) => b[1] - a[1])) {
    const inside = [...(trace.inside.get(script) ?? new Map<string, number>())].sort((a, b) => b[1] - a[1]);
    const commands = inside.reduce((sum, [, n]) => sum + n, 0);
    total += calls + commands;
    console.log(`${perRun(calls)} calls of ${script}, ${perRun(commands).trim()} commands inside per run:`);
    console.log(`          ${inside.map(([command, n]) => `${command} ${perRun(n).trim()}`).join(', ')}`);
  }
  const direct = [...trace.direct].sort((a, b) => b[1] - a[1]);
  total += direct.reduce((sum, [, n]) => sum + n, 0);
  console.log(`  direct: ${direct.map(([command, n]) => `${command} ${perRun(n).trim()}`).join(', ') || 'none'}`);
  console.log(`${perRun(total)} commands per run in all`);
}

/** Each client's address to its connection name (`sluice:<namespace>:<role>`), from CLIENT LIST. */
async function connectionNames(redis: Redis): Promise<Map<string, string>> {
  const list = (await redis.client('LIST')) as string;
  return new Map(
    list
      .split('\n')
      .map((line) => [/addr=(\S+)/.exec(line)?.[1], /name=(\S*)/.exec(line)?.[1]])
      .filter((pair): pair is [string, string] => !!pair[0] && !!pair[1]),
  );
}

/**
 * One round trip from the middle of the run: every command from one enqueue call to the next,
 * with its connection (a script's own commands indented under it) and its time in µs from the
 * enqueue, by Redis's clock.
 */
function printOneRoundTrip(lines: string[], names: Map<string, string>): void {
  const enqueues = lines.flatMap((line, i) => (/"fcall" "sluice_[0-9a-f]+_enqueue"/.test(line) ? [i] : []));
  const middle = Math.floor(enqueues.length / 2);
  // From a little before the enqueue, so a subscribe sent alongside it shows.
  const from = Math.max(enqueues[middle - 1] ?? 0, enqueues[middle] - 8);
  const window = lines.slice(from + (from === enqueues[middle - 1] ? 1 : 0), enqueues[middle + 1] ?? lines.length);
  const start = Number(lines[enqueues[middle]].split(' ')[0]);
  console.log('\none round trip (µs from the enqueue, Redis clock; MONITOR stretches the gaps):');
  for (const line of window) {
    const match = /^(\S+) \[\d+ (\S+)\] (.*)$/.exec(line);
    if (!match) continue;
    const at = ((Number(match[1]) - start) * 1e6).toFixed(0).padStart(6);
    const who = match[2] === 'lua' ? '    lua' : (names.get(match[2]) ?? match[2]).replace(/^sluice:[^:]+:/, '');
    const command = match[3].replace(/sluice_[0-9a-f]+_/, '').slice(0, 140);
    console.log(`${at}  ${who.padEnd(11)} ${command}`);
  }
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const value = (flag: string) => (argv.includes(flag) ? argv[argv.indexOf(flag) + 1] : undefined);
  const scenario = (value('--scenario') ?? 'drain-c1') as ScenarioName;
  const jobs = Number(value('--jobs') ?? 2_000);
  if (!isDrain(scenario) && !isRoundtrip(scenario)) throw new Error(`--scenario: a drain or round-trip scenario, got ${scenario}`);
  const server = await startRedisServer();
  const monitor = new Redis(server.url);
  const lines: string[] = [];
  try {
    const prepared = await new SluiceSystem().prepare(scenario, jobs, server.url);
    const feed = await monitor.monitor();
    feed.on('monitor', (time: string, args: string[], source: string) => {
      lines.push(`${time} [0 ${source.includes('lua') ? 'lua' : source}] ${args.map((a) => `"${a}"`).join(' ')}`);
    });
    await prepared.timed();
    const names = await connectionNames(monitor);
    feed.disconnect();
    await prepared.cleanup?.();
    const trace: Trace = { calls: new Map(), inside: new Map(), direct: new Map() };
    // Steady state only: from the 10 % to the 90 % mark of the complete calls.
    const completeAt = lines.flatMap((line, i) => (/"fcall" "sluice_[0-9a-f]+_complete"/.test(line) ? [i] : []));
    const from = completeAt[Math.floor(completeAt.length * 0.1)] ?? 0;
    const to = completeAt[Math.floor(completeAt.length * 0.9)] ?? lines.length;
    const runs = record(trace, lines.slice(from, to));
    console.log(`${scenario}, ${jobs} runs; the ${runs} finished between the 10 % and 90 % marks of its complete calls, per run:`);
    print(trace, runs);
    if (isRoundtrip(scenario)) printOneRoundTrip(lines, names);
  } finally {
    monitor.disconnect();
    await server.stop();
  }
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
