import { Injectable } from '@nestjs/common';
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
 * worker's path: keep them cheap and non-throwing.
 */
@Injectable()
export class RunEvents {
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  on<E extends keyof RunEventMap>(event: E, listener: (...args: RunEventMap[E]) => void): () => void {
    this.emitter.on(event, listener as (...args: unknown[]) => void);
    return () => this.emitter.off(event, listener as (...args: unknown[]) => void);
  }

  /** @internal */
  emit<E extends keyof RunEventMap>(event: E, ...args: RunEventMap[E]): void {
    if (this.emitter.listenerCount(event) === 0) return;
    try {
      this.emitter.emit(event, ...args);
    } catch {
      // A listener's bug must not fail a run whose outcome is already committed.
    }
  }
}
