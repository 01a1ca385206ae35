import { fork } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '../support/redis-server';

jest.setTimeout(60_000);

/**
 * An app closed while Redis is unreachable leaves nothing behind that keeps the process alive:
 * a CLI or a deploy step that closes its app during an outage exits at once (ioredis's 2 s
 * disconnect timer on a socket that never connected used to hold it).
 */
describe('closing an app during a Redis outage', () => {
  it('lets the process exit by itself right after app.close()', async () => {
    const child = fork(join(__dirname, 'close-during-outage.process.ts'), [], {
      execArgv: ['-r', 'ts-node/register/transpile-only'],
      env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true', REDIS_URL: `redis://127.0.0.1:${await freePort()}` },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const closedAt = await new Promise<number>((resolve, reject) => {
      child.once('message', () => resolve(Date.now()));
      child.once('exit', (code) => reject(new Error(`exited (${code}) before closing its app`)));
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
    expect(code).toBe(0);
    // The bound is what a process may take to wind down, well under ioredis's 2 s disconnect timer.
    expect(Date.now() - closedAt).toBeLessThan(1_000);
  });
});
