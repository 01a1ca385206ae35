import type { RunErrorInfo } from '../errors';
import type { DedupeMode } from '../interfaces/dedupe.options';
import { decodePayload } from '../redis/payload.codec';
import { RECORD_DEFAULT_MAX_ATTEMPTS } from '../redis/run.layout';
import { runIdTime } from '../workflow/run-id';

/** `batched`: a member of a batch workflow waiting for its batch to finish (see `RunInfo.batch`, docs/batches.md). */
export type RunState = 'waiting' | 'delayed' | 'active' | 'batched' | 'completed' | 'failed' | 'cancelled' | WaitState;

/** The states of a run in a durable wait: it holds no lease and no slot (see `RunContext.sleep` and the other waits). */
export type WaitState = 'sleeping' | 'waiting-signal' | 'waiting-event' | 'waiting-child';

/** What a run in a durable wait waits for (`RunInfo.waitingFor`). */
export type WaitingFor =
  | {
      /** `ctx.sleep` or `ctx.sleepUntil` (state `sleeping`). */
      kind: 'sleep';
      /** The sleep's name, as given to `ctx.sleep` or `ctx.sleepUntil`. */
      step: string;
      /** When the sleep ends (Redis clock). */
      until: Date;
    }
  | {
      /** `ctx.waitForSignal` (state `waiting-signal`). */
      kind: 'signal';
      /** `signal:<name>`: the wait's memo key without its `#<occurrence>`. */
      step: string;
      /** The signal's name. */
      name: string;
      /** When the wait times out; absent for a wait without `timeoutMs`. */
      until?: Date;
    }
  | {
      /** `ctx.waitForEvent` (state `waiting-event`). */
      kind: 'event';
      /** `event:<name>`: the wait's memo key without its `#<occurrence>`. */
      step: string;
      /** The event's name. */
      name: string;
      /** The event key waited for (`''` when the wait gave none). */
      key: string;
      /** When the wait times out; absent for a wait without `timeoutMs`. */
      until?: Date;
    }
  | {
      /** `ctx.invoke` or `ctx.invokeAll` (state `waiting-child`). */
      kind: 'child';
      /** `invoke:<workflow>` (of the first child, for `invokeAll`): the wait's memo key without its `#<occurrence>`. */
      step: string;
      /** The ids of the child runs waited for. */
      runIds: string[];
    };

const WAIT_STATES: Record<string, WaitState> = {
  sleep: 'sleeping',
  signal: 'waiting-signal',
  event: 'waiting-event',
  child: 'waiting-child',
};
/** "No deadline" in a wait record (NEVER in lua/includes/waits.lua). */
const NEVER = 4503599627370496;

/** Reads a wait record `<kind> <deadline> <memo key> <target>` (lua/includes/waits.lua). */
function parseWait(record: string): WaitingFor | undefined {
  const match = /^(\S+) (\S+) (\S+) ?(.*)$/.exec(record);
  if (!match) return undefined;
  const [, kind, deadline, key, target] = match;
  const until = Number(deadline) < NEVER ? { until: new Date(Number(deadline)) } : {};
  const step = key.replace(/#\d+$/, '');
  switch (kind) {
    case 'sleep':
      return { kind, step, until: new Date(Number(deadline)) };
    case 'signal':
      return { kind, step, name: target, ...until };
    case 'event': {
      const bar = target.indexOf('|');
      return { kind, step, name: target.slice(0, bar), key: target.slice(bar + 1), ...until };
    }
    case 'child':
      return { kind, step, runIds: target.split(' ').filter(Boolean) };
    default:
      return undefined;
  }
}

/** A run as stored in Redis, from `QueueClient.get`. */
export interface RunInfo<Out = unknown> {
  /** The run's id: the one given as `EnqueueOptions.id`, or the generated one. */
  id: string;
  /** The name of the workflow that runs it. */
  workflow: string;
  /** Where the run is now; in a durable wait, the wait's state, with `waitingFor` telling what for. */
  state: RunState;
  /** The run's input as stored and read back (see {@link Stored}); for a debounced run, that of the enqueue it kept (`dedupe.inputSeq`). */
  input: unknown;
  /** 0 to {@link MAX_PRIORITY}; higher runs first (`EnqueueOptions.priority`, default 0). */
  priority: number;
  /** The group (tenant) given at enqueue (`EnqueueOptions.group`); absent for a run without one. */
  group?: string;
  /** Attempts started so far: every claim, including after a stall or a hand-back at shutdown. */
  attempts: number;
  /** Attempts the run may take before it fails for good: `EnqueueOptions.attempts`, else the workflow's, else the module's `defaults.attempts` (3). */
  maxAttempts: number;
  /** Failed attempts so far. */
  failures: number;
  /**
   * When the run was created, by the Redis clock; for a run whose id was generated in a namespace
   * at key layout 4, the producer's clock when it made the id (which carries it).
   */
  createdAt: Date;
  /** When the run is (or was) due to start. */
  dueAt: Date;
  /** Start of the latest attempt. */
  startedAt?: Date;
  /** When the run completed, failed for good or was cancelled (Redis clock); absent before, and again once `retry` requeued it. */
  finishedAt?: Date;
  /** Set once completed. */
  result?: Out;
  /** The final error once failed; the latest error while retrying; never set once completed. */
  error?: RunErrorInfo;
  /** The latest value the run reported with `ctx.progress` (kept after it finishes); absent if none. */
  progress?: unknown;
  /** In a durable wait (state 'sleeping', 'waiting-signal', 'waiting-event' or 'waiting-child'): what for, and until when. */
  waitingFor?: WaitingFor;
  /** Enqueued with a dedupe (`EnqueueOptions.dedupe`): its window, and the enqueues folded into the run. */
  dedupe?: RunDedupe;
  /** Set on a run that `QueueClient.publish` started: the event's name and id. */
  event?: {
    /** The event's name. */
    name: string;
    /** The event's id (`PublishResult.id`). */
    id: string;
  };
  /** A member of a batch workflow: the id of its batch run (docs/batches.md). */
  batch?: string;
  /** A batch run: the workflow of its members (whose ids `QueueClient.batchMembers` lists). */
  batchOf?: string;
}

/** `RunInfo.dedupe`: which enqueues a deduplicated run stands for. */
export interface RunDedupe {
  /** The dedupe key the run was enqueued with. */
  key: string;
  /** `'throttle'` or `'debounce'`: how enqueues of the key are folded into the run. */
  mode: DedupeMode;
  /** Enqueues folded into the run, its creator included. */
  count: number;
  /** The number (`RunHandle.dedupe.seq`) of the enqueue whose input the run holds: 1 unless a debounce replaced it. */
  inputSeq: number;
}

/** The run hash fields, in the order {@link toRunInfo} reads them. */
export const RUN_FIELDS = [
  'workflow',
  'state',
  'input',
  'priority',
  'group',
  'attempts',
  'maxAttempts',
  'failures',
  'createdAt',
  'dueAt',
  'startedAt',
  'finishedAt',
  'result',
  'error',
  'progress',
  'wait',
  'dedupeKey',
  'dedupeMode',
  'dedupeCount',
  'dedupeInput',
  'event',
  'batch',
  'batchOf',
] as const;

/** Read by position, so that fields added to the list later need not shift it. */
const PROGRESS_AT = RUN_FIELDS.indexOf('progress');
const WAIT_AT = RUN_FIELDS.indexOf('wait');
const DEDUPE_AT = RUN_FIELDS.indexOf('dedupeKey');
const EVENT_AT = RUN_FIELDS.indexOf('event');
const BATCH_AT = RUN_FIELDS.indexOf('batch');
const BATCH_OF_AT = RUN_FIELDS.indexOf('batchOf');

/** Builds a {@link RunInfo} from the run hash's {@link RUN_FIELDS}; `null` if the run does not exist. */
export function toRunInfo(id: string, values: (string | null)[]): RunInfo | null {
  const [workflow, state, input, priority, group, attempts, maxAttempts, failures, createdAt, dueAt, startedAt, finishedAt, result, error] =
    values;
  if (!state || !workflow) return null;
  const created = createdAt ? Number(createdAt) : (runIdTime(id) ?? NaN);
  // A run in a durable wait is stored as 'delayed' (what older versions know); its wait says more.
  const waitingFor = state === 'delayed' && values[WAIT_AT] ? parseWait(values[WAIT_AT]) : undefined;
  return {
    id,
    workflow,
    state: waitingFor ? WAIT_STATES[waitingFor.kind] : (state as RunState),
    ...(waitingFor && { waitingFor }),
    input: decodePayload(input),
    priority: Number(priority ?? 0),
    ...(group && { group }),
    attempts: Number(attempts ?? 0),
    // A lean record (layout 4, lua/includes/records.lua) leaves out what these defaults give.
    maxAttempts: Number(maxAttempts ?? RECORD_DEFAULT_MAX_ATTEMPTS),
    failures: Number(failures ?? 0),
    createdAt: new Date(created),
    dueAt: new Date(dueAt ? Number(dueAt) : created),
    ...(startedAt && { startedAt: new Date(Number(startedAt)) }),
    ...(finishedAt && { finishedAt: new Date(Number(finishedAt)) }),
    ...(state === 'completed' && { result: decodePayload(result) }),
    // A completed run's record may still hold the error of an earlier attempt: not its outcome.
    ...(error && state !== 'completed' && { error: decodePayload<RunErrorInfo>(error) }),
    ...(values[PROGRESS_AT] && { progress: decodePayload(values[PROGRESS_AT]) }),
    ...(values[DEDUPE_AT] && { dedupe: toRunDedupe(values.slice(DEDUPE_AT, DEDUPE_AT + 4)) }),
    ...(values[EVENT_AT] && { event: eventOf(values[EVENT_AT]) }),
    ...(values[BATCH_AT] && { batch: values[BATCH_AT] }),
    ...(values[BATCH_OF_AT] && { batchOf: values[BATCH_OF_AT] }),
  };
}

/** `RunInfo.dedupe` from the fields 'dedupeKey', 'dedupeMode', 'dedupeCount', 'dedupeInput' (lua/enqueue-dedupe.lua). */
function toRunDedupe([key, mode, count, input]: (string | null)[]): RunDedupe {
  return { key: key as string, mode: mode as DedupeMode, count: Number(count ?? 1), inputSeq: Number(input ?? 1) };
}

/** A run's `event` field, `<name> <event id>` (lua/publish.lua). */
function eventOf(field: string): { name: string; id: string } {
  const space = field.indexOf(' ');
  return { name: field.slice(0, space), id: field.slice(space + 1) };
}
