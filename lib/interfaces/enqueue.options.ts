import type { Duration } from '../util/duration';
import type { DedupeOptions } from './dedupe.options';

/** Highest priority; scores keep priority in 20 bits (see bandScore in lua/includes/lanes.lua). */
export const MAX_PRIORITY = 1_048_575;

/** Options of one enqueue. */
export interface EnqueueOptions {
  /**
   * Run id, and idempotency key: enqueuing an id that exists returns the existing run and
   * writes nothing. Default: 16 base64url characters, the creation time in ms (7) then 54 random
   * bits (9): time-ordered, not secret. The id is free again once the finished run expires.
   */
  id?: string;
  /** Start no earlier than this from now: ms, or a string such as `'30s'`, `'10m'`. */
  delayMs?: Duration;
  /**
   * The old name of {@link EnqueueOptions.delayMs} (durations are named `…Ms`): still read, with a
   * `DeprecationWarning` (`SLUICE_DEP_DELAY`) once per process; giving both is an `InvalidOptionError`.
   * @deprecated use `delayMs`
   */
  delay?: Duration;
  /** Start no earlier than this time (wins over `delayMs`). */
  runAt?: Date;
  /** 0 (default) to 1 048 575; higher runs first, FIFO within a priority. */
  priority?: number;
  /** A tenant or other partition key stored with the run. */
  group?: string;
  /** Attempts for this run (default: the workflow's). */
  attempts?: number;
  /**
   * Time limit of each attempt of this run, in ms (1 to 2^31 − 1), overriding the workflow's
   * `timeoutMs` (see `WorkflowOptions.timeoutMs`). Named apart from `run()`'s `timeoutMs`, which
   * bounds the caller's wait. A run with a limit is never started through the enqueue fast path.
   */
  runTimeoutMs?: number;
  /**
   * Fold enqueues with one key into one run, for a time window: `'throttle'` (the first run
   * stands for `ttlMs`) or `'debounce'` (the run starts `ttlMs` after the last enqueue, with its
   * input). Wins over the `@Workflow`'s `dedupe`; `false` turns that off for this enqueue. The
   * returned handle tells what happened (`RunHandle.dedupe`). Not for `enqueueMany`. See
   * {@link DedupeOptions} and docs/dedupe.md.
   */
  dedupe?: DedupeOptions | false;
}

/** The keys of {@link EnqueueOptions}: any other is refused (see checkOptionKeys) but `delay`, the old name of `delayMs` (DELAY_RENAMED). */
export const ENQUEUE_OPTIONS: readonly string[] = ['id', 'delayMs', 'runAt', 'priority', 'group', 'attempts', 'runTimeoutMs'];

/**
 * The keys `QueueClient.enqueue`, `run` and `enqueueMany` take: {@link ENQUEUE_OPTIONS} and `dedupe`
 * (which `ctx.invoke` and the harness do not take).
 */
export const CLIENT_ENQUEUE_OPTIONS: readonly string[] = [...ENQUEUE_OPTIONS, 'dedupe'];

/** A validated enqueue, ready to become script arguments. */
export interface EnqueueRequest {
  id: string;
  workflow: string;
  input: string;
  priority: number;
  delayMs: number;
  runAtMs: number | undefined;
  attempts: number;
  group: string | undefined;
  /** Only when the enqueue set one. */
  runTimeoutMs?: number;
  /**
   * The id was generated for this enqueue (newRunId), so a run found under it is this enqueue's
   * own, from a try whose reply was lost: the call sends no nonce and the record stores none.
   */
  idGenerated?: true;
}
