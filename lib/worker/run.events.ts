import { Injectable, Logger } from '@nestjs/common';
import { EventEmitter } from 'node:events';

/** What a worker reports once a run's outcome is committed in Redis. */
export interface RunOutcomeEvent {
  runId: string;
  workflow: string;
  /** The attempt that ended (1-based). */
  attempt: number;
  /** Time spent executing this attempt, in ms. */
  durationMs: number;
}

export interface RunFailedEvent extends RunOutcomeEvent {
  error: { name: string; message: string };
  /** `true` when another attempt follows, `false` when the run failed for good. */
  willRetry: boolean;
}

interface RunEventMap {
  completed: [RunOutcomeEvent];
  failed: [RunFailedEvent];
}

/**
 * In-process events of this process's worker, emitted after the outcome is committed in Redis
 * (a listener never hears of a completion that a crash could still undo). For metrics and logs;
 * to await one run from anywhere, use `QueueClient.wait`. Listeners run synchronously on the
 * worker's path: keep them cheap. One that throws (or returns a promise that rejects) is logged as
 * a warning and skipped; the other listeners still run.
 */
@Injectable()
export class RunEvents {
  private readonly emitter = new EventEmitter().setMaxListeners(0);
  private readonly logger = new Logger('Sluice');

  on<E extends keyof RunEventMap>(event: E, listener: (...args: RunEventMap[E]) => void): () => void {
    this.emitter.on(event, listener as (...args: unknown[]) => void);
    return () => this.emitter.off(event, listener as (...args: unknown[]) => void);
  }

  /** @internal */
  emit<E extends keyof RunEventMap>(event: E, ...args: RunEventMap[E]): void {
    if (this.emitter.listenerCount(event) === 0) return;
    // Not emitter.emit(), which stops at the first listener that throws. rawListeners() is a copy,
    // so (as with emit()) a listener added or removed meanwhile only counts from the next event.
    for (const listener of this.emitter.rawListeners(event)) {
      try {
        const returned: unknown = Reflect.apply(listener, this.emitter, args);
        // An async listener's rejection would otherwise be unhandled, which can end the process.
        if (isThenable(returned)) returned.then(undefined, (error: unknown) => this.listenerFailed(event, error));
      } catch (error) {
        this.listenerFailed(event, error);
      }
    }
  }

  /** A listener's bug must not fail a run whose outcome is already committed: it is only logged. */
  private listenerFailed(event: keyof RunEventMap, error: unknown): void {
    try {
      this.logger.warn(`A RunEvents "${event}" listener failed, ignored: ${describeError(error)}`);
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
