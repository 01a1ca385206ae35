import type { RunErrorInfo } from '../errors';
import { decodePayload } from '../redis/payload.codec';

export type RunState = 'waiting' | 'delayed' | 'active' | 'completed' | 'failed' | 'cancelled';

/** A run as stored in Redis, from `QueueClient.get`. */
export interface RunInfo<Out = unknown> {
  id: string;
  workflow: string;
  state: RunState;
  input: unknown;
  priority: number;
  group?: string;
  /** Attempts started so far: every claim, including after a stall or a hand-back at shutdown. */
  attempts: number;
  maxAttempts: number;
  /** Failed attempts so far. */
  failures: number;
  createdAt: Date;
  /** When the run is (or was) due to start. */
  dueAt: Date;
  /** Start of the latest attempt. */
  startedAt?: Date;
  finishedAt?: Date;
  /** Set once completed. */
  result?: Out;
  /** The final error once failed; the latest error while retrying; never set once completed. */
  error?: RunErrorInfo;
  /** The latest value the run reported with `ctx.progress` (kept after it finishes); absent if none. */
  progress?: unknown;
}

/** The run hash fields, in the order {@link toRunInfo} reads them. */
export const RUN_FIELDS = [
  'workflow', 'state', 'input', 'priority', 'group', 'attempts', 'maxAttempts', 'failures',
  'createdAt', 'dueAt', 'startedAt', 'finishedAt', 'result', 'error',
  'progress',
] as const;

/** Read by position, so that fields added to the list later need not shift it. */
const PROGRESS_AT = RUN_FIELDS.indexOf('progress');

export function toRunInfo(id: string, values: (string | null)[]): RunInfo | null {
  const [workflow, state, input, priority, group, attempts, maxAttempts, failures, createdAt, dueAt, startedAt, finishedAt, result, error] = values;
  if (!state || !workflow) return null;
  return {
    id,
    workflow,
    state: state as RunState,
    input: decodePayload(input),
    priority: Number(priority ?? 0),
    ...(group && { group }),
    attempts: Number(attempts ?? 0),
    maxAttempts: Number(maxAttempts ?? 1),
    failures: Number(failures ?? 0),
    createdAt: new Date(Number(createdAt)),
    dueAt: new Date(Number(dueAt ?? createdAt)),
    ...(startedAt && { startedAt: new Date(Number(startedAt)) }),
    ...(finishedAt && { finishedAt: new Date(Number(finishedAt)) }),
    ...(state === 'completed' && { result: decodePayload(result) }),
    // A completed run's record may still hold the error of an earlier attempt: not its outcome.
    ...(error && state !== 'completed' && { error: decodePayload<RunErrorInfo>(error) }),
    ...(values[PROGRESS_AT] && { progress: decodePayload(values[PROGRESS_AT]) }),
  };
}
