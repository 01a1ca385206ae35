import { Injectable, Logger } from '@nestjs/common';
import { EventEmitter } from 'node:events';
import { ThrottledLog } from '../util/throttled-log';

/** An attempt of a run starts in this process (its claim is committed in Redis). */
export interface RunActiveEvent {
  runId: string;
  workflow: string;
  /** The attempt that starts (1-based). */
  attempt: number;
}

/** What a worker reports once a run's outcome is committed in Redis. */
export interface RunOutcomeEvent {
  runId: string;
  workflow: string;
  /** The attempt that ended (1-based). */
  attempt: number;
  /** Time spent executing this attempt, in ms. */
  durationMs: number;
}

/** An attempt failed (committed). `failed` fires for every failed attempt; see `willRetry`. */
export interface RunFailedEvent extends RunOutcomeEvent {
  error: { name: string; message: string };
  /** `true` when another attempt follows, `false` when the run failed for good. */
  willRetry: boolean;
}

/** An attempt failed and another follows: the `failed` event's payload narrowed, plus the backoff. */
export interface RunRetryingEvent extends RunFailedEvent {
  willRetry: true;
  /** Backoff before the next attempt is due, in ms (0: due at once). */
  delayMs: number;
}

/**
 * A run whose worker stopped renewing its lease (it died, or blocked its event loop for longer
 * than `lockMs`), recovered by **this** process's stalled scan. The scan runs in one worker of
 * the fleet at a time, so each stall is reported once, by the worker that recovered it.
 */
export interface RunStalledEvent {
  runId: string;
  workflow: string;
  /** Times this run has stalled so far, this one included. */
  stalls: number;
  /** `true`: the run is due again; `false`: it stalled more than `maxStalls` times and failed for good (`StalledError`). */
  requeued: boolean;
}

/** Each event's listener arguments. */
export interface RunEventMap {
  /** An attempt starts. */
  active: [RunActiveEvent];
  /** The run completed. */
  completed: [RunOutcomeEvent];
  /** An attempt failed: another follows (`willRetry`) or the run failed for good. */
  failed: [RunFailedEvent];
  /** An attempt failed and another follows (fires after `failed`). */
  retrying: [RunRetryingEvent];
  /** This process's stalled scan recovered the run. */
  stalled: [RunStalledEvent];
  /** The run suspended in a durable wait (`ctx.sleep`, `waitForSignal`…): the attempt ended, its slots are free. */
  suspended: [RunOutcomeEvent];
}

/** The events of {@link RunEvents} and `@OnWorkflowEvent`. */
export type RunEventName = keyof RunEventMap;

/** The payload of one event, e.g. `RunEventPayload<'failed'>` is {@link RunFailedEvent}. */
export type RunEventPayload<E extends RunEventName> = RunEventMap[E][0];

/** Every event name, for checks at decoration time. */
export const RUN_EVENT_NAMES: readonly RunEventName[] = ['active', 'completed', 'failed', 'retrying', 'stalled', 'suspended'];

/** Any event's listener, as a key of the per-listener maps. */
type AnyListener = (...args: never[]) => unknown;

/**
 * In-process events of this process's worker (see {@link RunEventMap}), emitted after what they
 * report is committed in Redis — the claim for `active`, the outcome for the others (a listener
 * never hears of a completion that a crash could still undo). For metrics and logs;
 * to await one run from anywhere, use `QueueClient.wait`. `@OnWorkflowEvent` methods are
 * listeners too. Listeners run synchronously on the worker's path: keep them cheap. One that
 * throws (or returns a promise that rejects) is logged as a warning and skipped; the other
 * listeners still run, and the run is unaffected.
 */
@Injectable()
export class RunEvents {
  private readonly emitter = new EventEmitter().setMaxListeners(0);
  private readonly logger = new Logger('Sluice');
  /** How a failing listener is named in the warning (an `@OnWorkflowEvent` method: `Class.method`). */
  private readonly labels = new WeakMap<AnyListener, string>();
  /** Failure lines of each listener, throttled (see listenerFailed). */
  private readonly failureLogs = new WeakMap<AnyListener, ThrottledLog>();

  /** Adds a listener; returns a function that removes it. */
  on<E extends keyof RunEventMap>(event: E, listener: (...args: RunEventMap[E]) => void): () => void {
    this.emitter.on(event, listener as (...args: unknown[]) => void);
    return () => this.emitter.off(event, listener as (...args: unknown[]) => void);
  }

  /** @internal `on`, with the name a failure warning gives the listener (see WorkflowEventExplorer). */
  onLabelled<E extends keyof RunEventMap>(event: E, listener: (...args: RunEventMap[E]) => unknown, label: string): () => void {
    this.labels.set(listener, label);
    return this.on(event, listener);
  }

  /** @internal Whether anyone listens, so the hot path builds no payload for nobody. */
  listens(event: keyof RunEventMap): boolean {
    return this.emitter.listenerCount(event) > 0;
  }

  /** @internal */
  emit<E extends keyof RunEventMap>(event: E, ...args: RunEventMap[E]): void {
    if (this.emitter.listenerCount(event) === 0) return;
    // Not emitter.emit(), which stops at the first listener that throws. rawListeners() is a copy,
    // so (as with emit()) a listener added or removed meanwhile only counts from the next event.
    for (const listener of this.emitter.rawListeners(event) as AnyListener[]) {
      try {
        const returned: unknown = Reflect.apply(listener, this.emitter, args);
        // An async listener's rejection would otherwise be unhandled, which can end the process.
        if (isThenable(returned)) returned.then(undefined, (error: unknown) => this.listenerFailed(event, error, listener));
      } catch (error) {
        this.listenerFailed(event, error, listener);
      }
    }
  }

  /** A listener's bug must not fail a run whose outcome is already committed: it is only logged. */
  private listenerFailed(event: keyof RunEventMap, error: unknown, listener: AnyListener): void {
    try {
      const label = this.labels.get(listener);
      const who = label ? `The @OnWorkflowEvent('${event}') handler ${label}` : `A RunEvents "${event}" listener`;
      // A handler whose backend is down fails on every run: one line a minute per handler.
      let log = this.failureLogs.get(listener);
      if (!log) this.failureLogs.set(listener, (log = new ThrottledLog(this.logger, 60_000)));
      log.warn(`${who} failed, ignored: ${describeError(error)}`);
    } catch {
      // Nor may a logger that throws.
    }
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

/** Never throws itself, whatever was thrown (String() throws on an object without a prototype). */
function describeError(error: unknown): string {
  try {
    return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  } catch {
    return 'a value that cannot be printed';
  }
}
