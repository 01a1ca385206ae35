import { InvalidOptionError } from '../errors';
import {
  DEDUPE_OPTIONS,
  type DedupeMode,
  type DedupeOptions,
  type DedupeRequest,
  type WorkflowDedupeOptions,
} from '../interfaces/dedupe.options';
import type { EnqueueRequest } from '../interfaces/enqueue.options';
import { checkInteger } from '../util/duration';
import { checkId } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';

/** Longest window, as for `delayMs`: a debounced run is delayed by it. */
const MAX_WINDOW_MS = 10 * 365 * 86_400_000;
const MODES: readonly DedupeMode[] = ['throttle', 'debounce'];

/**
 * Checks a dedupe's window options (all but the key), as an enqueue's `dedupe` or a `@Workflow`'s:
 * throws `InvalidOptionError` naming `field`, before any Redis call.
 */
export function checkDedupeWindow(value: unknown, field: string): Omit<DedupeRequest, 'key'> {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new InvalidOptionError(field, "must be an object { key, ttlMs, mode: 'throttle' | 'debounce', replace?, maxWaitMs? }");
  const options = value as Partial<DedupeOptions>;
  checkOptionKeys(options, DEDUPE_OPTIONS, field);
  const mode = options.mode;
  if (typeof mode !== 'string' || !MODES.includes(mode))
    throw new InvalidOptionError(`${field}.mode`, `must be 'throttle' or 'debounce', got ${JSON.stringify(mode) ?? String(mode)}`);
  const ttlMs = checkInteger(options.ttlMs, `${field}.ttlMs`, 1, MAX_WINDOW_MS);
  if (mode === 'throttle') {
    // A throttled run may have started already: its input is not the enqueues' to change.
    if (options.replace !== undefined)
      throw new InvalidOptionError(`${field}.replace`, "applies to mode 'debounce' only (a throttled run keeps its first input)");
    if (options.maxWaitMs !== undefined)
      throw new InvalidOptionError(`${field}.maxWaitMs`, "applies to mode 'debounce' only (a throttled run is never pushed back)");
    return { mode, ttlMs, replace: false };
  }
  if (options.replace !== undefined && typeof options.replace !== 'boolean')
    throw new InvalidOptionError(`${field}.replace`, `must be a boolean, got ${typeof options.replace}`);
  const maxWaitMs = options.maxWaitMs === undefined ? undefined : checkInteger(options.maxWaitMs, `${field}.maxWaitMs`, 1, MAX_WINDOW_MS);
  if (maxWaitMs !== undefined && maxWaitMs < ttlMs)
    throw new InvalidOptionError(`${field}.maxWaitMs`, `must be at least ttlMs (${ttlMs}), got ${maxWaitMs}`);
  return { mode, ttlMs, replace: options.replace !== false, ...(maxWaitMs !== undefined && { maxWaitMs }) };
}

/** Checks a `@Workflow({ dedupe })` declaration: its window, and a key function. */
export function checkDeclaredDedupe(value: unknown, field: string): void {
  checkDedupeWindow(value, field);
  if (typeof (value as { key?: unknown }).key !== 'function')
    throw new InvalidOptionError(`${field}.key`, 'must be a function of the input returning the dedupe key');
}

/**
 * The dedupe of one enqueue, checked, or undefined for none: the enqueue's own `dedupe` (`false`:
 * none), else the workflow's declared one with its key made from `input`. Debounce owns the run's
 * delay: an enqueue that sets `delayMs` or `runAt` too is refused.
 */
export function dedupeRequest(
  given: DedupeOptions | false | undefined,
  declared: WorkflowDedupeOptions | undefined,
  input: unknown,
  request: EnqueueRequest,
  field = 'opts.dedupe',
): DedupeRequest | undefined {
  if (given === false) return undefined;
  let dedupe: DedupeRequest;
  if (given !== undefined) {
    const window = checkDedupeWindow(given, field);
    dedupe = { key: checkId(given.key, `${field}.key`), ...window };
  } else if (declared) {
    const window = checkDedupeWindow(declared, `@Workflow('${request.workflow}') dedupe`);
    dedupe = { key: checkId(declared.key(input), `@Workflow('${request.workflow}') dedupe.key(input)`), ...window };
  } else return undefined;
  if (dedupe.mode === 'debounce' && (request.delayMs !== 0 || request.runAtMs !== undefined)) {
    const option = request.runAtMs !== undefined ? 'runAt' : 'delayMs';
    throw new InvalidOptionError(
      field.replace(/dedupe$/, option),
      "cannot be set with dedupe mode 'debounce', which delays the run by its ttlMs (see docs/dedupe.md)",
    );
  }
  return dedupe;
}
