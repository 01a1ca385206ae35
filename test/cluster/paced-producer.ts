import type { QueueClient } from '../../lib';
import { EFFECT_WORKFLOW } from './effect.workflow';

/** One enqueue the producer attempted, with its own id (so a run can be looked up whatever the reply). */
export interface Attempt {
  id: string;
  /** When the call was made (local clock, ms). */
  sentAt: number;
  /** When the reply arrived: set for an acknowledged enqueue. */
  ackAt?: number;
  /** The acknowledgement's `created` (ids are unique, so false only after a retried call). */
  created?: boolean;
  /** The error's name, for an enqueue that rejected (RedisUnavailableError: nothing written; OutcomeUnknownError: may exist). */
  error?: string;
  /** The error's message and when it came (local clock, ms), for a failure's diagnosis. */
  message?: string;
  failedAt?: number;
}

/**
 * Enqueues EffectWorkflow runs from a few concurrent lanes, each pausing `pauseMs` between its
 * calls (pacing, so the backlog stays bounded; not a synchronisation), until stopped. Every call
 * is recorded with its local send and acknowledgement times, so a test can tell the enqueues
 * acknowledged before a fault from those after it.
 */
export class PacedProducer {
  readonly attempts: Attempt[] = [];
  private stopped = false;
  private lanes: Promise<void>[] = [];
  private seq = 0;

  constructor(
    private readonly client: QueueClient,
    private readonly label: string,
    private readonly options: { lanes: number; pauseMs: number },
  ) {}

  start(): void {
    this.lanes = Array.from({ length: this.options.lanes }, () => this.lane());
  }

  /** Stops every lane after its current call (settled, so each attempt's outcome is known). */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.lanes);
  }

  get acked(): Attempt[] {
    return this.attempts.filter((a) => a.ackAt !== undefined);
  }

  get failed(): Attempt[] {
    return this.attempts.filter((a) => a.error !== undefined);
  }

  private async lane(): Promise<void> {
    while (!this.stopped) {
      const i = this.seq++;
      const attempt: Attempt = { id: `${this.label}-${i}`, sentAt: Date.now() };
      this.attempts.push(attempt);
      try {
        const handle = await this.client.enqueue(EFFECT_WORKFLOW, { i }, { id: attempt.id });
        attempt.ackAt = Date.now();
        // false when a retry after a lost reply found the run its first try had written
        attempt.created = handle.created;
      } catch (error) {
        attempt.error = (error as Error).name;
        attempt.message = (error as Error).message;
        attempt.failedAt = Date.now();
      }
      if (this.options.pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, this.options.pauseMs));
    }
  }
}

/** Polls `probe` every `everyMs` until it returns true; fails after `timeoutMs` naming `what` and the last state. */
export async function until(
  what: string,
  timeoutMs: number,
  probe: () => Promise<boolean | { done: boolean; state?: unknown }>,
  everyMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    const result = await probe();
    const done = typeof result === 'boolean' ? result : result.done;
    if (typeof result !== 'boolean') last = result.state;
    if (done) return;
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last === undefined ? '' : `; last state: ${JSON.stringify(last)}`}`,
      );
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
