/**
 * How {@link DedupeOptions} folds enqueues with one key together (docs/dedupe.md):
 * - `'throttle'`: the first enqueue starts a run; every enqueue with the key in the next `ttlMs`
 *   returns that run, and the run keeps its first input.
 * - `'debounce'`: the first enqueue creates a run due in `ttlMs`; each later enqueue with the key,
 *   while that run has not started, replaces its input (unless `replace: false`) and pushes its
 *   start back to `ttlMs` from then, at most `maxWaitMs` after the first enqueue.
 */
export type DedupeMode = 'throttle' | 'debounce';

/**
 * `EnqueueOptions.dedupe`: time-windowed deduplication of a workflow's runs by a key of yours
 * (an `id` dedupes forever; this, for a window). The window lives in Redis, in the namespace's
 * slot, and races between concurrent enqueues are decided there: however many producers enqueue
 * with one key at once, one run is made. See docs/dedupe.md.
 */
export interface DedupeOptions {
  /** The key runs are folded by, per workflow: letters, digits and `. _ : / @ # = + -`, at most 200 characters. */
  key: string;
  /**
   * The window, in ms (1 to 10 years). Throttle: how long after the first enqueue later ones
   * return its run. Debounce: how long after the latest enqueue the run starts.
   */
  ttlMs: number;
  /** `'throttle'` or `'debounce'`: see {@link DedupeMode}. */
  mode: DedupeMode;
  /**
   * Debounce only: whether a later enqueue's input replaces the pending run's (default `true`:
   * the run starts with the last input). `false` keeps the first input and only pushes the start
   * back. Refused with `'throttle'`, whose run may have started already.
   */
  replace?: boolean;
  /**
   * Debounce only: the latest the start can be pushed, in ms after the window's first enqueue
   * (at least `ttlMs`), so a steady stream of enqueues cannot hold the run back for ever.
   * Default: no bound.
   */
  maxWaitMs?: number;
}

/** The keys of {@link DedupeOptions} (any other is refused, see checkOptionKeys). */
export const DEDUPE_OPTIONS: readonly string[] = ['key', 'ttlMs', 'mode', 'replace', 'maxWaitMs'];

/**
 * `@Workflow({ dedupe })`: the default {@link DedupeOptions} of every enqueue of the workflow by
 * its class, with the key made from the input. An enqueue's own `dedupe` wins over it whole
 * (`dedupe: false` turns it off for that enqueue); an enqueue by name or contract does not use it.
 */
export interface WorkflowDedupeOptions<In = unknown> extends Omit<DedupeOptions, 'key'> {
  /**
   * The dedupe key of a run's input (see {@link DedupeOptions.key} for what it may hold). Typed
   * from the workflow's input schema where it has one; without one, annotate the parameter.
   * A method, so that an annotated parameter is accepted where the input type is `unknown`.
   */
  key(input: In): string;
}

/** The keys of {@link WorkflowDedupeOptions}. */
export const WORKFLOW_DEDUPE_OPTIONS: readonly string[] = DEDUPE_OPTIONS;

/**
 * What a deduplicated enqueue did (`RunHandle.dedupe.outcome`):
 * - `'created'`: it opened a window, with a new run;
 * - `'deduplicated'`: it found the window open and returned its run (debounce with
 *   `replace: false`: and pushed its start back);
 * - `'replaced'`: debounce: its input replaced the pending run's, whose start it pushed back;
 * - `'existing'`: its `id` named a run that exists already, which is returned as for any
 *   enqueue of an existing id; no window was opened.
 */
export type DedupeOutcome = 'created' | 'deduplicated' | 'replaced' | 'existing';

/** `RunHandle.dedupe`: how a deduplicated enqueue went. */
export interface DedupeResult {
  /** What the enqueue did: opened a window, joined one, replaced a pending input, or found its `id` taken. */
  outcome: DedupeOutcome;
  /** The dedupe key of the enqueue. */
  key: string;
  /** `'throttle'` or `'debounce'`. */
  mode: DedupeMode;
  /**
   * This enqueue's number among those folded into the run, as Redis ordered them: 1 for the one
   * that created it (0 for `'existing'`). With debounce and `replace`, the run holds the input of
   * the highest number (`RunInfo.dedupe.inputSeq`).
   */
  seq: number;
}

/** A checked dedupe of one enqueue, the key made. */
export interface DedupeRequest {
  key: string;
  mode: DedupeMode;
  ttlMs: number;
  /** Debounce: later inputs replace the pending run's (always false for throttle). */
  replace: boolean;
  maxWaitMs?: number;
}
