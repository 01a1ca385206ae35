import { InvalidOptionError } from '../errors';
import { ENQUEUE_OPTIONS, MAX_PRIORITY, type EnqueueOptions, type EnqueueRequest } from '../interfaces/enqueue.options';
import { encodePayload } from '../redis/payload.codec';
import { checkInteger, toMilliseconds, type Duration } from '../util/duration';
import { checkId, checkName } from '../util/names';
import { checkOptionKeys, DELAY_RENAMED, readRenamedOption } from '../util/option-keys';
import { newRunId } from './run-id';
import { MAX_TIMER_MS } from './step.options';

/** Furthest a run can be scheduled ahead, as for `delayMs`. */
const MAX_DELAY_MS = 10 * 365 * 86_400_000;

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
  checkOptionKeys(options, allowed, 'opts', [DELAY_RENAMED]);
  const delay = readRenamedOption<Duration>(options, DELAY_RENAMED);
  let runAtMs: number | undefined;
  if (options.runAt !== undefined) {
    if (!(options.runAt instanceof Date) || Number.isNaN(options.runAt.getTime()))
      throw new InvalidOptionError('opts.runAt', 'must be a valid Date');
    runAtMs = options.runAt.getTime();
    if (runAtMs - Date.now() > MAX_DELAY_MS) throw new InvalidOptionError('opts.runAt', 'must be at most 10 years from now');
  }
  const runTimeoutMs =
    options.runTimeoutMs === undefined ? undefined : checkInteger(options.runTimeoutMs, 'opts.runTimeoutMs', 1, MAX_TIMER_MS);
  return {
    id: options.id === undefined ? newRunId() : checkId(options.id, 'opts.id'),
    ...(options.id === undefined && { idGenerated: true as const }),
    workflow: workflow.name,
    input: encodePayload(input, 'input', maxPayloadBytes),
    priority: options.priority === undefined ? 0 : checkInteger(options.priority, 'opts.priority', 0, MAX_PRIORITY),
    delayMs: delay === undefined ? 0 : toMilliseconds(delay, options.delayMs === undefined ? 'opts.delay' : 'opts.delayMs'),
    runAtMs,
    attempts: options.attempts === undefined ? workflow.attempts : checkInteger(options.attempts, 'opts.attempts', 1, 1_000),
    group: options.group === undefined ? undefined : checkName(options.group, 'opts.group'),
    ...(runTimeoutMs !== undefined && { runTimeoutMs }),
  };
}
