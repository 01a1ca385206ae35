/**
 * `npm run test:compat`: proves the packed package works next to each supported Nest major, as an
 * application installs it. Run by .ci/run after the other suites.
 *
 * 1. Builds the package and `npm pack`s it.
 * 2. Per Nest major, installs the tarball into a fresh temp directory together with that major's
 *    `@nestjs/common`, `@nestjs/core`, `reflect-metadata` and `rxjs` (npm's normal peer resolution:
 *    no --legacy-peer-deps, so a peer range that leaves the major out fails with ERESOLVE). One
 *    install per major, shared by that major's apps.
 * 3. Per app (a Nest major and a module format): a subdirectory whose package.json says
 *    `"type": "module"` (ESM) or `"type": "commonjs"` (CJS); test/compat/app/app.ts is compiled there
 *    by tsc (`module: nodenext`, so the same source becomes ESM or CJS, type-checked against that
 *    Nest and the package's declarations) and run with node against a redis-server of its own on a
 *    free loopback port. The app must print its COMPAT-RESULT line and exit 0 by itself.
 *    The app also checks that `import` and `require` of `nest-sluice` and `nest-sluice/testing`
 *    give identical exports (the ESM entries re-export the one CommonJS build).
 * 4. Per install, the `nest-sluice` bin (`nest-sluice migrate --json`) against that Redis.
 *
 * Any failure fails the run (exit code 1) after the summary. `COMPAT_NEST=12` (comma-separated)
 * runs only those majors; `COMPAT_KEEP=1` keeps the temp directory (it is kept anyway on failure).
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { LocalRedis, startRedisServer } from '../support/redis-server';

type Format = 'esm' | 'cjs';

interface Target {
  nest: string;
  /** The versions installed next to the tarball (npm specs). */
  packages: string[];
  formats: Format[];
}

const TARGETS: Target[] = [
  { nest: '10', packages: ['@nestjs/common@^10', '@nestjs/core@^10', 'reflect-metadata@^0.2', 'rxjs@^7'], formats: ['cjs'] },
  { nest: '11', packages: ['@nestjs/common@^11', '@nestjs/core@^11', 'reflect-metadata@^0.2', 'rxjs@^7'], formats: ['cjs', 'esm'] },
  // Nest 12 is ESM-only: the CJS app and our CommonJS build load it with require(esm).
  { nest: '12', packages: ['@nestjs/common@^12', '@nestjs/core@^12', 'reflect-metadata@^0.2', 'rxjs@^7'], formats: ['esm', 'cjs'] },
];

const ROOT = resolve(__dirname, '..', '..');
const TSC = require.resolve('typescript/bin/tsc', { paths: [ROOT] });
const INSTALL_TIMEOUT_MS = 300_000;
const APP_TIMEOUT_MS = 60_000;

interface Outcome {
  name: string;
  ok: boolean;
  ms: number;
  note: string;
}

const outcomes: Outcome[] = [];

interface Exec {
  code: number | null;
  output: string;
  ms: number;
}

/**
 * The environment for child processes: npm puts its own config into `npm_*` variables when it
 * runs a script (npm_config_local_prefix=<this repo> among them), which would leak into the npm
 * calls in the temp directories. Only the variables that say how to reach the registry are kept.
 */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const keep = /^npm_config_(cache|userconfig|globalconfig|cafile|registry|proxy|https_proxy|noproxy|strict_ssl)$/i;
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!/^npm_/i.test(key) || keep.test(key)) env[key] = value;
  return { ...env, ...extra };
}

function exec(command: string, args: string[], options: { cwd: string; timeoutMs: number; env?: Record<string, string> }): Promise<Exec> {
  const started = Date.now();
  return new Promise((done) => {
    const child = spawn(command, args, { cwd: options.cwd, env: childEnv(options.env), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => {
      output += `\n[compat] killed after ${options.timeoutMs} ms`;
      child.kill('SIGKILL');
    }, options.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      done({ code: null, output: `${output}\n${error.message}`, ms: Date.now() - started });
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      done({ code, output, ms: Date.now() - started });
    });
  });
}

function record(name: string, ok: boolean, ms: number, note: string, output?: string): boolean {
  outcomes.push({ name, ok, ms, note });
  console.log(`[compat] ${ok ? 'ok  ' : 'FAIL'} ${name} (${(ms / 1000).toFixed(1)} s)${note ? `: ${note}` : ''}`);
  if (!ok && output) console.log(output.replace(/^/gm, '    | '));
  return ok;
}

async function step(
  name: string,
  command: string,
  args: string[],
  cwd: string,
  timeoutMs: number,
  env?: Record<string, string>,
): Promise<Exec | undefined> {
  const result = await exec(command, args, { cwd, timeoutMs, env });
  return record(name, result.code === 0, result.ms, result.code === 0 ? '' : `exit code ${result.code}`, result.output)
    ? result
    : undefined;
}

async function pack(work: string): Promise<string | undefined> {
  if (!(await step('build (npm run build)', 'npm', ['run', 'build'], ROOT, 300_000))) return undefined;
  const packed = await exec('npm', ['pack', '--json', '--pack-destination', work], { cwd: ROOT, timeoutMs: 120_000 });
  let files: string[] = [];
  let tarball = '';
  try {
    const [info] = JSON.parse(packed.output.slice(packed.output.indexOf('['))) as { filename: string; files: { path: string }[] }[];
    tarball = join(work, info.filename);
    files = info.files.map((file) => file.path);
  } catch {
    record('npm pack', false, packed.ms, 'no JSON from npm pack', packed.output);
    return undefined;
  }
  const required = [
    'package.json',
    'dist/index.js',
    'dist/index.d.ts',
    'dist/index.mjs',
    'dist/index.d.mts',
    'dist/testing/index.js',
    'dist/testing/index.mjs',
    'dist/dashboard/index.js',
    'dist/dashboard/index.mjs',
    'dist/dashboard/assets/dashboard.js',
    'dist/dashboard/assets/dashboard.css',
    'dist/cli/migrate.cli.js',
    'lua/enqueue.lua',
    'lua/includes/lanes.lua',
  ];
  const missing = required.filter((file) => !files.includes(file));
  const ok = packed.code === 0 && missing.length === 0;
  record(
    'npm pack',
    ok,
    packed.ms,
    ok ? `${files.length} files` : `exit code ${packed.code}, missing: ${missing.join(', ')}`,
    packed.output,
  );
  return ok ? tarball : undefined;
}

async function install(target: Target, dir: string, tarball: string): Promise<boolean> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `compat-nest${target.nest}`, private: true }, null, 2));
  const name = `Nest ${target.nest}: npm install`;
  const result = await exec('npm', ['install', '--no-audit', '--no-fund', tarball, ...target.packages], {
    cwd: dir,
    timeoutMs: INSTALL_TIMEOUT_MS,
  });
  if (result.code !== 0 || /ERESOLVE/.test(result.output)) return record(name, false, result.ms, `exit code ${result.code}`, result.output);
  const version = (pkg: string) =>
    (JSON.parse(readFileSync(join(dir, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;
  const core = version('@nestjs/core');
  if (core.split('.')[0] !== target.nest) return record(name, false, result.ms, `installed @nestjs/core ${core}`, result.output);
  const engines = [...result.output.matchAll(/package: '([^']+)',\s*\n.*required: \{ node: '([^']+)' \}/g)].map(
    (m) => `${m[1]} wants node ${m[2]}`,
  );
  return record(
    name,
    true,
    result.ms,
    `@nestjs/common ${version('@nestjs/common')}, @nestjs/core ${core}${engines.length ? ` (npm warns EBADENGINE: ${engines.join(', ')})` : ''}`,
  );
}

function writeApp(dir: string, format: Format): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ private: true, type: format === 'esm' ? 'module' : 'commonjs' }, null, 2));
  copyFileSync(join(__dirname, 'app', 'app.ts'), join(dir, 'app.ts'));
  const compilerOptions = {
    target: 'ES2022',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    strict: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    esModuleInterop: true,
    // The third-party declarations (Nest's, @types/node) are not ours to check; nest-sluice's own
    // declarations are still what app.ts is checked against.
    skipLibCheck: true,
    noEmitOnError: true,
    types: ['node'],
    typeRoots: [join(ROOT, 'node_modules', '@types')],
    rootDir: '.',
    outDir: '.',
  };
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['app.ts'] }, null, 2));
}

async function runApp(target: Target, format: Format, dir: string, withCli: boolean): Promise<void> {
  const label = `Nest ${target.nest} + ${format === 'esm' ? 'ESM' : 'CJS'} app`;
  writeApp(dir, format);
  if (!(await step(`${label}: tsc`, process.execPath, [TSC, '-p', dir], dir, 120_000))) return;

  let redis: LocalRedis | undefined;
  try {
    redis = await startRedisServer();
    const result = await exec(process.execPath, ['app.js'], {
      cwd: dir,
      timeoutMs: APP_TIMEOUT_MS,
      env: { REDIS_URL: redis.url, COMPAT_LABEL: label },
    });
    const line = result.output.split('\n').find((l) => l.startsWith('COMPAT-RESULT '));
    const summary = line
      ? (JSON.parse(line.slice('COMPAT-RESULT '.length)) as {
          result: unknown;
          runMs: number;
          ticks: number;
          fired: number;
          closeMs: number;
          failures: string[];
        })
      : undefined;
    const ok = result.code === 0 && !!summary && summary.failures.length === 0;
    const note = summary
      ? `result ${JSON.stringify(summary.result)}, run ${summary.runMs} ms, schedule fired ${summary.fired}x, close ${summary.closeMs} ms${result.code === 0 ? '' : `, exit code ${result.code}`}`
      : `exit code ${result.code}, no COMPAT-RESULT line`;
    record(`${label}: run`, ok, result.ms, note, result.output);

    if (withCli) {
      // The bin, as installed (node_modules/.bin), against the same Redis.
      const bin = join(dir, '..', 'node_modules', '.bin', 'nest-sluice');
      const cli = await exec(bin, ['migrate', '--url', redis.url, '--namespace', 'compat-cli', '--json'], { cwd: dir, timeoutMs: 30_000 });
      let parsed: { to?: unknown } | undefined;
      try {
        parsed = JSON.parse(cli.output.trim().split('\n').pop() ?? '') as { to?: unknown };
      } catch {
        parsed = undefined;
      }
      const cliOk = cli.code === 0 && typeof parsed?.to === 'number';
      record(
        `Nest ${target.nest}: nest-sluice migrate (bin)`,
        cliOk,
        cli.ms,
        cliOk ? cli.output.trim() : `exit code ${cli.code}`,
        cli.output,
      );
    }
  } catch (error) {
    record(`${label}: run`, false, 0, (error as Error).message);
  } finally {
    await redis?.stop();
  }
}

async function main(): Promise<void> {
  const started = Date.now();
  const only = process.env.COMPAT_NEST?.split(',').map((major) => major.trim());
  const targets = TARGETS.filter((target) => !only || only.includes(target.nest));
  const work = mkdtempSync(join(tmpdir(), 'sluice-compat-'));
  console.log(
    `[compat] node ${process.version} (require(esm): ${process.features.require_module === true ? 'yes' : 'no'}), work dir ${work}`,
  );
  console.log(`[compat] Nest majors: ${targets.map((t) => `${t.nest} (${t.formats.join(', ')})`).join('; ')}`);

  const tarball = await pack(work);
  if (tarball) {
    // The installs are the slow part (network): all majors at once, each into its own directory.
    const installed = await Promise.all(targets.map((target) => install(target, join(work, `nest${target.nest}`), tarball)));
    for (const [i, target] of targets.entries()) {
      if (!installed[i]) continue;
      for (const [j, format] of target.formats.entries()) await runApp(target, format, join(work, `nest${target.nest}`, format), j === 0);
    }
  }

  const failed = outcomes.filter((outcome) => !outcome.ok);
  const expected = targets.reduce((n, target) => n + target.formats.length, 0);
  const appsOk = outcomes.filter((outcome) => outcome.ok && outcome.name.endsWith(': run')).length;
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log('');
  console.log('[compat] summary');
  for (const outcome of outcomes)
    console.log(`  ${outcome.ok ? 'ok  ' : 'FAIL'} ${outcome.name.padEnd(44)} ${(outcome.ms / 1000).toFixed(1).padStart(6)} s`);
  if (failed.length > 0 || appsOk !== expected) {
    console.log(
      `[compat] FAILED: ${failed.length} step(s) failed, ${appsOk}/${expected} apps passed, in ${seconds} s. Temp directory kept: ${work}`,
    );
    process.exitCode = 1;
    return;
  }
  console.log(`[compat] passed: ${appsOk}/${expected} apps, in ${seconds} s`);
  if (process.env.COMPAT_KEEP) console.log(`[compat] temp directory kept: ${work}`);
  else rmSync(work, { recursive: true, force: true });
}

main().catch((error: unknown) => {
  console.error('[compat] failed:', error);
  process.exitCode = 1;
});
