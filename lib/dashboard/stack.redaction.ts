import { sep } from 'node:path';
import type { RunInfo } from '../client/run-info';
import type { RunTimeline } from '../client/run.timeline';

/** An absolute path in a stack frame: POSIX, Windows, or a file:// URL. */
const PATH = /(?:file:\/\/)?(?:\/|[A-Za-z]:\\)[^\s():]+/g;

/**
 * A stack without the server's absolute paths (`redactStacks`): a file under the app's working
 * directory keeps its path from there, one under `node_modules/` from there, any other only its
 * name. Frames keep their function names and line numbers, so the trace stays useful.
 */
export function redactStack(stack: string, cwd = process.cwd()): string {
  const root = cwd.endsWith(sep) ? cwd : cwd + sep;
  return stack.replace(PATH, (match) => {
    const path = match.replace(/^file:\/\//, '');
    const modules = path.lastIndexOf(`${sep}node_modules${sep}`);
    if (modules >= 0) return path.slice(modules + 1);
    if (path.startsWith(root)) return path.slice(root.length);
    return `…${sep}${path.slice(path.lastIndexOf(sep) + 1)}`;
  });
}

/** A run page's data with every stack redacted (the run's error and each attempt's). */
export function redactRun<T extends { run: RunInfo; timeline: RunTimeline }>(found: T): T {
  const { run, timeline } = found;
  const error = run.error?.stack ? { ...run.error, stack: redactStack(run.error.stack) } : run.error;
  const attempts = timeline.attempts.map((attempt) =>
    attempt.error?.stack ? { ...attempt, error: { ...attempt.error, stack: redactStack(attempt.error.stack) } } : attempt,
  );
  return { ...found, run: { ...run, ...(error && { error }) }, timeline: { attempts } };
}
