import type { Redis } from 'ioredis';
import { OutcomeUnknownError } from '../errors';
import type { Send } from './link.options';

/** How often overdue replies are looked for (see InflightCalls.sweep). */
const SWEEP_MS = 100;

interface InFlight {
  deadline: number;
  operation: string;
  lost(reason: string): void;
  fail(error: Error): void;
}

/** What the table tells the connection its calls go over. */
export interface InflightOwner {
  /** No call is in flight over `redis` (a retired connection can close now). */
  idle(redis: Redis): void;
  /** A call over `redis` had no reply by its deadline (failed as lost already): the connection is to be replaced. */
  overdue(redis: Redis, reason: string): void;
}

/**
 * The calls sent and not answered yet, per connection, each with the deadline of its reply. One
 * sweep for all calls, rather than a timer per call, keeps the common path cheap; bounds are
 * seconds, so a tenth of a second of slack is immaterial.
 */
export class InflightCalls {
  private readonly calls = new Map<Redis, Set<InFlight>>();
  private sweeper?: NodeJS.Timeout;

  constructor(private readonly owner: InflightOwner) {}

  /**
   * Sends one try of a call over `redis` and tracks it until its reply, or its deadline (then it
   * fails as lost: {@link OutcomeUnknownError}). `classify` maps what ioredis rejects with.
   */
  send<T>(
    operation: string,
    redis: Redis,
    send: Send<T>,
    deadline: number,
    retry: boolean,
    classify: (operation: string, error: Error, redis: Redis) => Error,
  ): Promise<T> {
    let calls = this.calls.get(redis);
    if (!calls) this.calls.set(redis, (calls = new Set()));
    const set = calls;
    this.sweeper ??= setInterval(() => this.sweep(), SWEEP_MS).unref();
    return new Promise<T>((resolve, reject) => {
      const call: InFlight = {
        deadline,
        operation,
        lost: (reason) =>
          set.delete(call) && reject(new OutcomeUnknownError(operation, `${reason}; the call may or may not have taken effect`)),
        fail: (error) => set.delete(call) && reject(error),
      };
      set.add(call);
      let sent: Promise<T>;
      try {
        sent = send(redis, retry);
      } catch (error) {
        sent = Promise.reject(error);
      }
      sent.then(
        (value) => set.delete(call) && resolve(value),
        (error: Error) => set.delete(call) && reject(classify(operation, error, redis)),
      );
    });
  }

  /** How many calls over `redis` wait for their reply. */
  count(redis: Redis): number {
    return this.calls.get(redis)?.size ?? 0;
  }

  /** Fails the calls over `redis` as lost (they may have run). */
  lose(redis: Redis, reason: string): void {
    this.calls.get(redis)?.forEach((call) => call.lost(reason));
  }

  /** Fails the calls over `redis`, each with its own error. */
  failOn(redis: Redis, error: () => Error): void {
    this.calls.get(redis)?.forEach((call) => call.fail(error()));
  }

  /** Fails every call over every connection with `error`. */
  failAll(error: Error): void {
    this.calls.forEach((calls) => [...calls].forEach((call) => call.fail(error)));
  }

  /** Stops tracking `redis` (its calls are settled, or left to fail with it). */
  forget(redis: Redis): void {
    this.calls.delete(redis);
  }

  /** For good: no sweep after the link closes. */
  stop(): void {
    clearInterval(this.sweeper);
  }

  /** Fails the calls whose reply is overdue and has their connection replaced. */
  private sweep(): void {
    const now = Date.now();
    for (const [redis, calls] of this.calls) {
      if (calls.size === 0) this.owner.idle(redis);
      const overdue = [...calls].find((call) => call.deadline <= now);
      if (!overdue) continue;
      const reason = `no reply to ${overdue.operation} in time`;
      [...calls].filter((call) => call.deadline <= now).forEach((call) => call.lost(reason));
      this.owner.overdue(redis, reason);
    }
  }
}
