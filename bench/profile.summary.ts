/**
 * Sums a `.cpuprofile` (as `--cpu-profile <dir>` writes them, see cpu.profile.ts) into µs of CPU
 * per run, so two builds' profiles compare by numbers rather than by eye in DevTools:
 *
 *   npx ts-node --transpile-only bench/profile.summary.ts <file.cpuprofile> [--runs 40000]
 *     [--top 40] [--base <other.cpuprofile>] [--match <text>] [--samples]
 *
 * Prints the CPU the process spent while profiled (everything but `(idle)`), split into
 * JavaScript, GC and native `(program)` time; then self and inclusive time per function and
 * self time per file, each in µs per run (`--runs`, default: the jobs in the file name's run if
 * unknown, else 1). Inclusive time counts a sample once per function even when the function is
 * on the stack more than once (recursion, promise chains). `--base` prints the base profile's
 * figures beside and the difference; `--match` keeps only functions or files whose name contains
 * the text (e.g. `lib/` for Sluice's own code).
 *
 * V8 times a sample by the wall clock up to the next one, so on a busy machine a process that
 * was preempted has the wait counted to whatever it was doing (often a socket write that woke
 * Redis). `--samples` counts samples instead, each worth the profile's median interval: time the
 * process did not run yields no sample, so this is closer to CPU time when the cores are shared.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Per-name totals of one profile, in µs. */
interface Summary {
  totalUs: number;
  idleUs: number;
  gcUs: number;
  programUs: number;
  selfByFunction: Map<string, number>;
  inclusiveByFunction: Map<string, number>;
  selfByFile: Map<string, number>;
}

const ROOT = process.cwd();

function fileOf(frame: CallFrame): string {
  if (!frame.url) return `(${frame.functionName || 'native'})`;
  const path = frame.url.replace(/^file:\/\//, '');
  const inModules = path.lastIndexOf('node_modules/');
  if (inModules >= 0) return path.slice(inModules);
  return path.startsWith('/') ? relative(ROOT, path) : path;
}

function functionOf(frame: CallFrame): string {
  if (!frame.url) return frame.functionName || '(anonymous)';
  return `${frame.functionName || '(anonymous)'} ${fileOf(frame)}:${frame.lineNumber + 1}`;
}

function summarize(profile: CpuProfile, bySamples: boolean): Summary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const self = new Map<number, number>();
  const sorted = [...profile.timeDeltas].sort((a, b) => a - b);
  const interval = sorted[Math.floor(sorted.length / 2)] ?? 0;
  // A sample's time is the delta to the next sample (V8 attributes time that way in DevTools too),
  // or with `--samples` the median interval.
  for (let i = 0; i < profile.samples.length; i++) {
    const us = bySamples ? interval : Math.max(0, profile.timeDeltas[i + 1] ?? 0);
    self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + us);
  }
  const summary: Summary = {
    totalUs: 0,
    idleUs: 0,
    gcUs: 0,
    programUs: 0,
    selfByFunction: new Map(),
    inclusiveByFunction: new Map(),
    selfByFile: new Map(),
  };
  const add = (map: Map<string, number>, key: string, us: number) => map.set(key, (map.get(key) ?? 0) + us);
  for (const [id, us] of self) {
    const node = byId.get(id)!;
    const name = node.callFrame.functionName;
    summary.totalUs += us;
    if (name === '(idle)') {
      summary.idleUs += us;
      continue;
    }
    if (name === '(garbage collector)') summary.gcUs += us;
    if (name === '(program)') summary.programUs += us;
    add(summary.selfByFunction, functionOf(node.callFrame), us);
    add(summary.selfByFile, fileOf(node.callFrame), us);
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const fn = functionOf(byId.get(at)!.callFrame);
      if (fn === '(root)' || seen.has(fn)) continue;
      seen.add(fn);
      add(summary.inclusiveByFunction, fn, us);
    }
  }
  return summary;
}

function parseArgs(argv: string[]) {
  const value = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const flags = new Set(['--runs', '--top', '--base', '--match']);
  const file = argv.find((arg, i) => !arg.startsWith('--') && !flags.has(argv[i - 1]));
  if (!file) throw new Error('usage: profile.summary.ts <file.cpuprofile> [--runs N] [--top N] [--base <file>] [--match <text>]');
  return {
    file,
    base: value('--base'),
    runs: Number(value('--runs') ?? 1),
    top: Number(value('--top') ?? 40),
    match: value('--match'),
    bySamples: argv.includes('--samples'),
  };
}

function main(): void {
  const args = parseArgs(process.argv.slice(2));
  const load = (file: string) => summarize(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, args.bySamples);
  const now = load(args.file);
  const base = args.base ? load(args.base) : undefined;
  const perRun = (us: number | undefined) => (us === undefined ? '' : (us / args.runs).toFixed(2));
  const row = (label: string, us: number, baseUs?: number) =>
    console.log(
      `${perRun(us).padStart(9)}${base ? `${perRun(baseUs ?? 0).padStart(9)}${((us - (baseUs ?? 0)) / args.runs).toFixed(2).padStart(9)}` : ''}  ${label}`,
    );
  const header = (title: string) =>
    console.log(`\n${title}\n${'µs/run'.padStart(9)}${base ? `${'base'.padStart(9)}${'diff'.padStart(9)}` : ''}`);

  console.log(`${args.file}${base ? ` against ${args.base}` : ''}, per run of ${args.runs}${args.bySamples ? ', by sample count' : ''}`);
  header('CPU (all but idle)');
  const busy = (s: Summary) => s.totalUs - s.idleUs;
  row('busy', busy(now), base && busy(base));
  row('  JavaScript (and what it calls)', busy(now) - now.gcUs - now.programUs, base && busy(base) - base.gcUs - base.programUs);
  row('  (garbage collector)', now.gcUs, base?.gcUs);
  row('  (program)', now.programUs, base?.programUs);
  row('idle', now.idleUs, base?.idleUs);

  const table = (title: string, key: 'selfByFunction' | 'inclusiveByFunction' | 'selfByFile') => {
    header(title);
    const names = new Set([...now[key].keys(), ...(base ? base[key].keys() : [])]);
    const rows = [...names]
      .filter((name) => !args.match || name.includes(args.match))
      .map((name) => ({ name, us: now[key].get(name) ?? 0, baseUs: base?.[key].get(name) ?? 0 }))
      .sort((a, b) => Math.max(b.us, b.baseUs) - Math.max(a.us, a.baseUs))
      .slice(0, args.top);
    for (const { name, us, baseUs } of rows) row(name, us, base && baseUs);
  };
  table('Self time by function', 'selfByFunction');
  table('Inclusive time by function', 'inclusiveByFunction');
  table('Self time by file', 'selfByFile');
}

main();
