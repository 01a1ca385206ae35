import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = resolve(__dirname, '..', '..');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/**
 * The TypeScript files a docs page tells a new user to write: each ```ts block of `text` (from
 * `from` on, up to `to` if given) that opens with a `// <path>.ts` line, by that path.
 */
export function pageFiles(text: string, from = 0, to = text.length): Record<string, string> {
  const files: Record<string, string> = {};
  for (const [, body] of text.slice(from, to).matchAll(/```ts\n([\s\S]*?)```/g)) {
    const name = /^\/\/ ([\w./-]+\.ts)\b/.exec(body)?.[1];
    if (name) files[name] = body;
  }
  return files;
}

/**
 * A new user's app in `dir`: the package as published (dist/ built from lib/, its package.json and
 * lua/) installed as `nest-sluice`, its peers beside it, `files` written, and all compiled by tsc
 * under strict settings into `out/`. Resolves tsc's output ('' when it compiled cleanly) and the
 * app's directory.
 */
export async function packedApp(dir: string, files: Record<string, string>): Promise<{ app: string; tscOutput: string }> {
  const pkg = join(dir, 'pkg');
  await run(process.execPath, [TSC, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', join(pkg, 'dist'), '--sourceMap', 'false'], {
    cwd: ROOT,
  });
  cpSync(join(ROOT, 'package.json'), join(pkg, 'package.json'));
  symlinkSync(join(ROOT, 'lua'), join(pkg, 'lua'));
  symlinkSync(join(ROOT, 'node_modules'), join(pkg, 'node_modules'));
  // The dashboard's assets, as the build copies them (scripts/copy-dashboard-assets.mjs).
  cpSync(join(ROOT, 'lib', 'dashboard', 'assets'), join(pkg, 'dist', 'dashboard', 'assets'), { recursive: true });

  const app = join(dir, 'app');
  mkdirSync(join(app, 'node_modules'), { recursive: true });
  for (const entry of readdirSync(join(ROOT, 'node_modules')))
    if (!entry.startsWith('.')) symlinkSync(join(ROOT, 'node_modules', entry), join(app, 'node_modules', entry));
  symlinkSync(pkg, join(app, 'node_modules', 'nest-sluice'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(app, name)), { recursive: true });
    writeFileSync(join(app, name), text);
  }
  const compilerOptions = {
    target: 'ES2022',
    module: 'commonjs',
    moduleResolution: 'node',
    strict: true,
    esModuleInterop: true,
    skipLibCheck: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    outDir: 'out',
    rootDir: '.',
    types: ['node'],
  };
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['**/*.ts'], exclude: ['node_modules', 'out'] }));
  const compiled = await run(process.execPath, [TSC, '-p', app], { cwd: app }).catch((error: { stdout?: string }) => error);
  return { app, tscOutput: 'stdout' in compiled ? (compiled.stdout ?? '') : '' };
}
