/**
 * The public API (what `nest-sluice`, `nest-sluice/testing` and `nest-sluice/dashboard` export, with
 * their types) is pinned by the API Extractor reports in api/*.api.md. A refactor must leave them
 * unchanged; a deliberate API change is accepted with `npm run api:update` and the reports committed
 * with it, so the change is reviewed as a diff of the API rather than found by users.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';

const root = join(__dirname, '..', '..');

describe('public API surface', () => {
  it('matches the committed API reports in api/*.api.md', async () => {
    const { code, output } = await new Promise<{ code: number; output: string }>((resolve) => {
      execFile(process.execPath, [join(root, 'scripts', 'api-report.mjs')], { cwd: root, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, output: `${stdout}${stderr}` });
      });
    });
    if (code !== 0) throw new Error(output);
  }, 180_000);
});
