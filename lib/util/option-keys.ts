import { InvalidOptionError } from '../errors';
import { warnDeprecatedOnce } from './deprecation';

/**
 * An option that was renamed: `from` (the old name) is still read, with a `DeprecationWarning`
 * (`code`) once per process, and giving both names is refused.
 */
export interface RenamedOption {
  readonly from: string;
  readonly to: string;
  /** `process.emitWarning` code: `SLUICE_DEP_…`. */
  readonly code: string;
}

/** Durations are named `…Ms` (issue 30): the wait options' `timeout` became `timeoutMs`. */
export const TIMEOUT_RENAMED: RenamedOption = { from: 'timeout', to: 'timeoutMs', code: 'SLUICE_DEP_TIMEOUT' };
/** The enqueue option `delay` became `delayMs`. */
export const DELAY_RENAMED: RenamedOption = { from: 'delay', to: 'delayMs', code: 'SLUICE_DEP_DELAY' };

/**
 * Names that users bring from other libraries or from older versions, each with the name this
 * package uses: suggested where the old name is not accepted (e.g. `run(…, { timeout })`), even
 * though it is not close in spelling.
 */
const KNOWN_OLD_NAMES: Readonly<Record<string, string>> = {
  timeout: 'timeoutMs',
  delay: 'delayMs',
  retries: 'attempts',
  maxAttempts: 'attempts',
  jobId: 'id',
  runId: 'id',
  lockDuration: 'lockMs',
  removeOnComplete: 'keep',
  removeOnFail: 'keep',
  limiter: 'rateLimit',
  duration: 'perMs',
  repeat: 'schedules',
  pattern: 'cron',
  timezone: 'tz',
};

/**
 * Refuses a key of `opts` that is not one of `allowed` (one whose value is `undefined` passes):
 * a typo such as `timout` would otherwise be ignored silently, and only typed callers are warned
 * by TypeScript. The error names the key as `<where>.<key>` and, when one of `allowed` is close
 * (see {@link suggestOptionKey}), the key meant. The old names of `renamed` pass: their reader
 * ({@link readRenamedOption}) warns. Checks own keys only, before any Redis call.
 * @param where names the options in the error: `opts`, `ctx.waitForSignal opts`, `QueueModule options.worker`
 */
export function checkOptionKeys(
  opts: object | null | undefined,
  allowed: readonly string[],
  where = 'opts',
  renamed: readonly RenamedOption[] = [],
): void {
  if (opts === null || typeof opts !== 'object') return;
  for (const key of Object.keys(opts)) {
    if ((opts as Record<string, unknown>)[key] === undefined || allowed.includes(key)) continue;
    if (renamed.some(({ from }) => from === key)) continue;
    const meant = suggestOptionKey(key, allowed);
    const hint = meant === undefined ? '' : `; did you mean \`${meant}\`?`;
    throw new InvalidOptionError(`${where}.${key}`, `is not an option here${hint} (the options are ${allowed.join(', ')})`);
  }
}

/**
 * The value of a renamed option: its new name's, else its old name's, warning once per process
 * that the old name is deprecated. Call after {@link checkOptionKeys}.
 * @throws InvalidOptionError when both names are given (which one would win is not obvious)
 */
export function readRenamedOption<T>(opts: object | null | undefined, renamed: RenamedOption, where = 'opts'): T | undefined {
  if (opts === null || typeof opts !== 'object') return undefined;
  const values = opts as Record<string, unknown>;
  const current = values[renamed.to];
  const old = values[renamed.from];
  if (old === undefined) return current as T | undefined;
  if (current !== undefined) {
    throw new InvalidOptionError(
      `${where}.${renamed.from}`,
      `is the old name of \`${renamed.to}\`, which is given too: give only \`${renamed.to}\``,
    );
  }
  warnDeprecatedOnce(
    renamed.code,
    `nest-sluice: the option \`${renamed.from}\` (${where}) is deprecated; name it \`${renamed.to}\` (same values). The old name will be removed in a future major version.`,
  );
  return old as T;
}

/**
 * The key of `allowed` that `key` most likely meant: the new name of a known old one
 * (`timeout` → `timeoutMs`), the same key in other case (`delayMS` → `delayMs`), one within a
 * small edit distance, ignoring case and a `Ms` suffix (`timout` → `timeoutMs`), or one it begins
 * (`prio` → `priority`). `undefined` when none is close.
 */
export function suggestOptionKey(key: string, allowed: readonly string[]): string | undefined {
  const old = Object.prototype.hasOwnProperty.call(KNOWN_OLD_NAMES, key) ? KNOWN_OLD_NAMES[key] : undefined;
  if (old !== undefined && allowed.includes(old)) return old;
  const lower = key.toLowerCase();
  const sameCase = allowed.find((candidate) => candidate.toLowerCase() === lower);
  if (sameCase !== undefined) return sameCase;
  const bound = lower.length <= 4 ? 1 : 2;
  let best: { key: string; distance: number } | undefined;
  for (const candidate of allowed) {
    const forms = [candidate.toLowerCase(), candidate.replace(/Ms$/, '').toLowerCase()];
    const distance = Math.min(...forms.map((form) => editDistance(lower, form)));
    if (distance <= bound && (best === undefined || distance < best.distance)) best = { key: candidate, distance };
  }
  if (best !== undefined) return best.key;
  return lower.length >= 4 ? allowed.find((candidate) => candidate.toLowerCase().startsWith(lower)) : undefined;
}

/** Edits (insert, delete, substitute, swap of neighbours) from `a` to `b`: optimal string alignment. */
function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2) return 3; // farther than any bound used: skip the table
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) rows[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      rows[i][j] = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) rows[i][j] = Math.min(rows[i][j], rows[i - 2][j - 2] + 1);
    }
  }
  return rows[a.length][b.length];
}
