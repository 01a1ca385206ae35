import type { EnqueueOptions } from '../interfaces/enqueue.options';
import type { Duration } from '../util/duration';
import type { Stored } from './payload.types';

/** What `ctx.waitForSignal` and `ctx.waitForEvent` resolve with: the payload, or that the wait timed out. */
export type WaitOutcome<T> =
  | {
      /** `false`: the signal or event came. */
      timedOut: false;
      /** The signal's or event's payload, as stored and read back (see {@link Stored}). */
      payload: Stored<T>;
    }
  | {
      /** `true`: the wait's `timeoutMs` passed first; there is no payload. */
      timedOut: true;
    };

/** Options of `ctx.waitForSignal`. */
export interface SignalWaitOptions {
  /** Give up after this long (ms or e.g. `'2d'`) and resolve with `{ timedOut: true }`. Default: wait for ever. */
  timeoutMs?: Duration;
  /**
   * The old name of {@link SignalWaitOptions.timeoutMs} (durations are named `…Ms`): still read,
   * with a `DeprecationWarning` (`SLUICE_DEP_TIMEOUT`) once per process; giving both is an
   * `InvalidOptionError`.
   * @deprecated use `timeoutMs`
   */
  timeout?: Duration;
}

/** The keys of {@link SignalWaitOptions} (besides `timeout`, the old name of `timeoutMs`). */
export const SIGNAL_WAIT_OPTIONS: readonly string[] = ['timeoutMs'];

/** Options of `ctx.waitForEvent`. */
export interface EventWaitOptions {
  /**
   * Which events of the name this run waits for, e.g. an order id: `sendEvent(name, { key })`
   * resumes exactly the runs waiting on that name and key. Default `''` (every run waiting on the
   * name without a key).
   */
  key?: string;
  /** Give up after this long (ms or e.g. `'2d'`) and resolve with `{ timedOut: true }`. Default: wait for ever. */
  timeoutMs?: Duration;
  /**
   * The old name of {@link EventWaitOptions.timeoutMs}: still read, with a `DeprecationWarning`
   * (`SLUICE_DEP_TIMEOUT`) once per process; giving both is an `InvalidOptionError`.
   * @deprecated use `timeoutMs`
   */
  timeout?: Duration;
}

/** The keys of {@link EventWaitOptions} (besides `timeout`, the old name of `timeoutMs`). */
export const EVENT_WAIT_OPTIONS: readonly string[] = ['key', 'timeoutMs'];

/** Options of `ctx.invoke`: a subset of the enqueue options. */
export type InvokeOptions = Pick<EnqueueOptions, 'id' | 'priority' | 'group' | 'attempts'>;

/** The keys of {@link InvokeOptions}. */
export const INVOKE_OPTIONS: readonly string[] = ['id', 'priority', 'group', 'attempts'];

/** One child of `ctx.invokeAll`. */
export interface InvokeCall<W = unknown> {
  /** The child's workflow: its class, its contract or its name. */
  workflow: W;
  /** The child run's input (checked against the workflow's input schema, if it has one). */
  input: unknown;
  /** The child's id, priority, group and attempts; by default its id derives from the parent's id and the call's memo key. */
  opts?: InvokeOptions;
}

/** Most children one `ctx.invokeAll` starts (its wait records every child's id). */
export const MAX_INVOKE_ALL = 1000;
/** Most bytes of encoded input one `ctx.invokeAll` (or `invoke`) sends, all children together. */
export const MAX_INVOKE_BYTES = 16 * 1024 * 1024;
/** Most signals a run's mailbox holds (`QueueClient.signal` beyond it: `SignalMailboxFullError`). */
export const MAX_MAILBOX = 100;
