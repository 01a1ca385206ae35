import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * The last release before rich payloads (issue 30): the code a rolling deploy runs beside this one.
 * Taken from this repository's history, so the mixed-fleet tests need a clone with history (CI's is).
 */
export const PREVIOUS_RELEASE = '94d2dc9';

const ROOT = resolve(__dirname, '..', '..');

/**
 * That release's `lib/`, `lua/` and `tsconfig.json` in a directory of their own (made once per
 * machine, then reused), with this checkout's node_modules beside them, plus `app` from
 * test/fixtures/previous-release/ to run with it.
 */
export function previousReleaseTree(app: string): string {
  const dir = join(tmpdir(), `sluice-release-${PREVIOUS_RELEASE}`);
  if (!existsSync(join(dir, 'lib', 'index.ts'))) {
    const building = `${dir}.${process.pid}`;
    rmSync(building, { recursive: true, force: true });
    mkdirSync(building, { recursive: true });
    const archive = `${building}.tar`;
    try {
      execFileSync('git', ['-C', ROOT, 'archive', '-o', archive, PREVIOUS_RELEASE, 'lib', 'lua', 'tsconfig.json'], { stdio: 'pipe' });
    } catch (error) {
      throw new Error(`the mixed-fleet tests need commit ${PREVIOUS_RELEASE} in this clone's history: ${String(error)}`);
    }
    execFileSync('tar', ['-x', '-f', archive, '-C', building]);
    rmSync(archive);
    symlinkSync(join(ROOT, 'node_modules'), join(building, 'node_modules'));
    // Another test process may have made it meanwhile: either copy is the same.
    if (!existsSync(join(dir, 'lib', 'index.ts'))) renameSync(building, dir);
    else rmSync(building, { recursive: true, force: true });
  }
  copyFileSync(join(ROOT, 'test', 'fixtures', 'previous-release', app), join(dir, app));
  return dir;
}

/** A process running `app` against the previous release, talking over IPC. */
export function forkPreviousRelease(app: string, args: string[]): ChildProcess {
  const dir = previousReleaseTree(app);
  return fork(join(dir, app), args, {
    cwd: dir,
    execArgv: ['-r', 'ts-node/register/transpile-only'],
    env: { ...process.env, TS_NODE_PROJECT: join(dir, 'tsconfig.json') },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

/** The next IPC message from `child` matching `accept`, or a rejection when it exits or `ms` pass first. */
export function nextMessage<T>(child: ChildProcess, accept: (message: T) => boolean, ms = 30_000): Promise<T> {
  return new Promise<T>((done, fail) => {
    const timer = setTimeout(() => finish(() => fail(new Error(`no message from the previous release within ${ms} ms`))), ms);
    const onMessage = (message: T) => accept(message) && finish(() => done(message));
    const onExit = (code: number | null) => finish(() => fail(new Error(`the previous release exited (${code}) first`)));
    const finish = (settle: () => void) => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
      settle();
    };
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}
