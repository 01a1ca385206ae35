import { randomUUID } from 'node:crypto';
import { InvalidOptionError } from '../errors';
import { encodePayload } from '../redis/payload.codec';
import { checkInteger, Duration, toMilliseconds } from '../util/duration';
import { checkId, checkName } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';
import { MAX_TIMER_MS } from '../workflow/step.options';

/** Furthest a run can be scheduled ahead, as for `delay`. */
const MAX_DELAY_MS = 10 * 365 * 86_400_000;

/** Highest priority; scores keep priority in 20 bits (see lua/includes/common.lua). */
export const MAX_PRIORITY = 1_048_575;

/** Options of one enqueue. */
export interface EnqueueOptions {
  /**
   * Run id, and idempotency key: enqueuing an id that exists returns the existing run and
   * writes nothing. Default: a random UUID. The id is free again once the finished run expires.
   */
  id?: string;
  /** Start no earlier than this from now: ms, or a string such as `'30s'`, `'10m'`. */
  delay?: Duration;
  /** Start no earlier than this time (wins over `delay`). */
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
}

/** The keys of {@link EnqueueOptions}: any other is refused (see checkOptionKeys). */
export const ENQUEUE_OPTIONS: readonly string[] = ['id', 'delay', 'runAt', 'priority', 'group', 'attempts', 'runTimeoutMs'];

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
}

/**
 * Checks everything about one enqueue before any Redis call; throws the matching typed error.
 * @param allowed the keys `opts` may hold: the enqueue's, and for `run()` its wait options too
 */
export function buildEnqueueRequest(
  workflow: { name: string; attempts: number },
  input: unknown,
  opts: EnqueueOptions | undefined,
  maxPayloadBytes: number,
  allowed: readonly string[] = ENQUEUE_OPTIONS,
): EnqueueRequest {
  if (opts !== undefined && (opts === null || typeof opts !== 'object')) throw new InvalidOptionError('opts', 'must be an object');
  const options = opts ?? {};
  checkOptionKeys(options, allowed);
  let runAtMs: number | undefined;
  if (options.runAt !== undefined) {
    if (!(options.runAt instanceof Date) || Number.isNaN(options.runAt.getTime())) throw new InvalidOptionError('opts.runAt', 'must be a valid Date');
    runAtMs = options.runAt.getTime();
    if (runAtMs - Date.now() > MAX_DELAY_MS) throw new InvalidOptionError('opts.runAt', 'must be at most 10 years from now');
  }
  const runTimeoutMs = options.runTimeoutMs === undefined ? undefined : checkInteger(options.runTimeoutMs, 'opts.runTimeoutMs', 1, MAX_TIMER_MS);
  return {
    id: options.id === undefined ? randomUUID() : checkId(options.id, 'opts.id'),
    workflow: workflow.name,
    input: encodePayload(input, 'input', maxPayloadBytes),
    priority: options.priority === undefined ? 0 : checkInteger(options.priority, 'opts.priority', 0, MAX_PRIORITY),
    delayMs: options.delay === undefined ? 0 : toMilliseconds(options.delay, 'opts.delay'),
    runAtMs,
    attempts: options.attempts === undefined ? workflow.attempts : checkInteger(options.attempts, 'opts.attempts', 1, 1_000),
    group: options.group === undefined ? undefined : checkName(options.group, 'opts.group'),
    ...(runTimeoutMs !== undefined && { runTimeoutMs }),
  };
}
