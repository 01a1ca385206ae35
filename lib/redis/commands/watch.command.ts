import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** A run as a waiter reads it (lua/watch.lua); the payloads still encoded. */
export interface WatchedRun {
  state: string;
  /** The encoded result of a completed run; null before. */
  result: string | null;
  /** The encoded error of a failed or cancelled run (see RunErrorInfo); null otherwise. */
  error: string | null;
  workflow: string | null;
  /** The encoded progress last reported; null if none was (see lua/progress.lua). */
  progress: string | null;
  /** The sequence number of that progress report; null with it. */
  progressSeq: string | null;
}

/**
 * Reads a run for a waiter and, with `publish`, marks it waited on so its outcome (and progress)
 * will be published. A read and a flag: repeating it is harmless.
 * @returns null if there is no such run
 */
export async function watchRun(scripts: LuaScripts, keys: RedisKeys, runId: string, publish: boolean): Promise<WatchedRun | null> {
  const [state, result, error, workflow, progress, progressSeq] = await scripts.run<(string | null)[]>(
    'watch',
    [keys.run(runId)],
    [publish ? 1 : 0],
    { idempotent: true },
  );
  return state ? { state, result, error, workflow, progress, progressSeq } : null;
}
