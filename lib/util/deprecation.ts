/** The deprecation codes warned about in this process: each is warned about once. */
const warned = new Set<string>();

/**
 * Emits a `DeprecationWarning` (`process.emitWarning`, so `--no-deprecation` silences it and
 * `--throw-deprecation` makes it throw) the first time `code` is met in this process: an old
 * option name used in a loop must not flood the log.
 */
export function warnDeprecatedOnce(code: string, message: string): void {
  if (warned.has(code)) return;
  warned.add(code);
  process.emitWarning(message, { type: 'DeprecationWarning', code });
}
