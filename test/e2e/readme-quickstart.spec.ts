import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { dropNamespace, rawRedis, redisUrl } from '../support/app';

const run = promisify(execFile);
const ROOT = resolve(__dirname, '..', '..');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/**
 * The README's Quick start, as a new user copies it: its TypeScript files (each block that opens
 * with a `// <file>.ts` line) are written to a fresh app, compiled with tsc under strict settings
 * against the package as built for publishing, and run against the suite's Redis.
 */
export function quickStartFiles(readme: string): Record<string, string> {
  const start = readme.indexOf('\n## Quick start');
  const end = readme.indexOf('\n### ', start);
  const section = readme.slice(start, end);
  const files: Record<string, string> = {};
  for (const [, body] of section.matchAll(/```ts\n([\s\S]*?)```/g)) {
    const name = /^\/\/ ([\w.-]+\.ts)\b/.exec(body)?.[1];
    if (name) files[name] = body;
  }
  return files;
}

describe('README Quick start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-quickstart-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('compiles as written against the package and runs: the workflow completes and its result comes back', async () => {
    const files = quickStartFiles(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    expect(Object.keys(files).sort()).toEqual(['app.module.ts', 'main.ts']);

    // The package as published: dist/ built from lib/, with its package.json and lua/.
    const pkg = join(dir, 'pkg');
    await run(process.execPath, [TSC, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', join(pkg, 'dist'), '--sourceMap', 'false'], {
      cwd: ROOT,
    });
    cpSync(join(ROOT, 'package.json'), join(pkg, 'package.json'));
    symlinkSync(join(ROOT, 'lua'), join(pkg, 'lua'));
    symlinkSync(join(ROOT, 'node_modules'), join(pkg, 'node_modules'));

    // The app: its own node_modules, with the package and its peers installed.
    const app = join(dir, 'app');
    mkdirSync(join(app, 'node_modules'), { recursive: true });
    for (const entry of readdirSync(join(ROOT, 'node_modules')))
      if (!entry.startsWith('.')) symlinkSync(join(ROOT, 'node_modules', entry), join(app, 'node_modules', entry));
    symlinkSync(pkg, join(app, 'node_modules', 'nest-sluice'));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(app, name), text);
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
      types: ['node'],
    };
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['*.ts'] }));
    const compiled = await run(process.execPath, [TSC, '-p', app], { cwd: app }).catch((error: { stdout?: string }) => error);
    expect('stdout' in compiled ? compiled.stdout : '').toBe('');

    const redis = rawRedis();
    try {
      const { stdout } = await run(process.execPath, [join(app, 'out', 'main.js')], {
        cwd: app,
        env: { ...process.env, REDIS_URL: redisUrl() },
        timeout: 30_000,
      });
      expect(stdout).toMatch(/^invoice inv-1001$/m);
    } finally {
      await dropNamespace(redis, 'shop');
      redis.disconnect();
    }
  }, 120_000);
});
