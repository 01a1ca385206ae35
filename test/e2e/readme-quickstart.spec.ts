import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { dropNamespace, rawRedis, redisUrl } from '../support/app';
import { packedApp, pageFiles } from '../support/packed-app';

const run = promisify(execFile);
const ROOT = resolve(__dirname, '..', '..');

/** The README's Quick start files (each ```ts block that opens with a `// <file>.ts` line). */
export function quickStartFiles(readme: string): Record<string, string> {
  const start = readme.indexOf('\n## Quick start');
  return pageFiles(readme, start, readme.indexOf('\n## ', start + 1));
}

/**
 * The README's Quick start, as a new user copies it: its TypeScript files are written to a fresh
 * app, compiled with tsc under strict settings against the package as built for publishing, and
 * run against the suite's Redis.
 */
describe('README Quick start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-quickstart-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('compiles as written against the package and runs: the workflow completes and its result comes back', async () => {
    const files = quickStartFiles(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    expect(Object.keys(files).sort()).toEqual(['app.module.ts', 'main.ts']);
    const { app, tscOutput } = await packedApp(dir, files);
    expect(tscOutput).toBe('');

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
