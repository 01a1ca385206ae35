import { InvalidOptionError } from '../errors';

/**
 * Refuses a key of `opts` that is not one of `allowed` (one whose value is `undefined` passes):
 * a typo such as `delayMs` would otherwise be ignored silently, and only typed callers are warned
 * by TypeScript. `where` names the options in the error (`opts`, `ctx.invoke opts`).
 */
export function checkOptionKeys(opts: object | null | undefined, allowed: readonly string[], where = 'opts'): void {
  if (opts === null || typeof opts !== 'object') return;
  for (const key in opts) {
    if ((opts as Record<string, unknown>)[key] === undefined || allowed.includes(key)) continue;
    throw new InvalidOptionError(`${where}.${key}`, `is not an option here (one of ${allowed.join(', ')})`);
  }
}
