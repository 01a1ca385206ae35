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
 * What a waiter's read asks to be published: nothing more ('none'), its outcome (and progress)
 * on the run's done channel too ('add'), there instead of the inbox the run's record names
 * ('only': the caller's own inbox), or on the caller's inbox too (`{ inbox }`: its id; see
 * lua/watch.lua).
 */
export type WatchPublish = 'none' | 'add' | 'only' | { inbox: string };

const PUBLISH_ARG = { none: 0, add: 1, only: 2 } as const;

/**
 * Reads a run for a waiter and marks it waited on as `publish` says, so its outcome (and, on the
 * done channel, progress) will be published there. A read and a flag: repeating it is harmless.
 * @returns null if there is no such run
 */
export async function watchRun(scripts: LuaScripts, keys: RedisKeys, runId: string, publish: WatchPublish): Promise<WatchedRun | null> {
  const [state, result, error, workflow, progress, progressSeq] = await scripts.run<(string | null)[]>(
    'watch',
    [keys.run(runId)],
    typeof publish === 'object' ? [3, publish.inbox] : [PUBLISH_ARG[publish]],
    { idempotent: true },
  );
  return state ? { state, result, error, workflow, progress, progressSeq } : null;
}
