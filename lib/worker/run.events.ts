import { Injectable, Logger } from '@nestjs/common';
import { isThenable } from '../util/thenable';
import { EventEmitter } from 'node:events';
import { ThrottledLog } from '../util/throttled-log';
import type { RunEventMap } from '../interfaces/run.events';

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
  /**
   * Each event's listeners as of the last change (a copy the emitter made then): emitted per
   * run, so emit copies nothing. A listener added or removed during an emit counts from the next
   * one, as with EventEmitter's own emit.
   */
  private readonly current = new Map<keyof RunEventMap, AnyListener[]>();

  /** Adds a listener; returns a function that removes it. */
  on<E extends keyof RunEventMap>(event: E, listener: (...args: RunEventMap[E]) => void): () => void {
    this.emitter.on(event, listener as (...args: unknown[]) => void);
    this.changed(event);
    return () => {
      this.emitter.off(event, listener as (...args: unknown[]) => void);
      this.changed(event);
    };
  }

  private changed(event: keyof RunEventMap): void {
    this.current.set(event, this.emitter.rawListeners(event) as AnyListener[]);
  }

  /** @internal `on`, with the name a failure warning gives the listener (see WorkflowEventExplorer). */
  onLabelled<E extends keyof RunEventMap>(event: E, listener: (...args: RunEventMap[E]) => unknown, label: string): () => void {
    this.labels.set(listener, label);
    return this.on(event, listener);
  }

  /** @internal Whether anyone listens, so the hot path builds no payload for nobody. */
  listens(event: keyof RunEventMap): boolean {
    return (this.current.get(event)?.length ?? 0) > 0;
  }

  /** @internal Calls every listener of `event` with `args`; one that throws or rejects is logged and skipped. */
  emit<E extends keyof RunEventMap>(event: E, ...args: RunEventMap[E]): void {
    const listeners = this.current.get(event);
    if (listeners === undefined || listeners.length === 0) return;
    // Not emitter.emit(), which stops at the first listener that throws.
    for (const listener of listeners) {
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

/** Never throws itself, whatever was thrown (String() throws on an object without a prototype). */
function describeError(error: unknown): string {
  try {
    return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  } catch {
    return 'a value that cannot be printed';
  }
}
