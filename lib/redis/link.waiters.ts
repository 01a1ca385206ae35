import type { Redis } from 'ioredis';

interface Waiter {
  ready(redis: Redis): void;
  fail(error: Error): void;
  operation: string;
  failFast?: boolean;
}

/** The calls waiting for a link's connection to be ready, each until its deadline. */
export class ReadyWaiters {
  private readonly waiting = new Set<Waiter>();

  get size(): number {
    return this.waiting.size;
  }

  /**
   * Resolves with the connection once it is ready; rejects with `unavailable(operation)` at the
   * deadline (or at the connection's first error, if `failFast`: see {@link failFast}).
   */
  wait(operation: string, deadline: number, failFast: boolean, unavailable: (operation: string) => Error): Promise<Redis> {
    return new Promise((resolve, reject) => {
      const settle = (fn: () => void) => {
        clearTimeout(timer);
        this.waiting.delete(waiter);
        fn();
      };
      const waiter: Waiter = {
        operation,
        failFast,
        ready: (ready) => settle(() => resolve(ready)),
        fail: (error) => settle(() => reject(error)),
      };
      const timer = setTimeout(() => waiter.fail(unavailable(operation)), Math.max(0, deadline - Date.now()));
      this.waiting.add(waiter);
    });
  }

  ready(redis: Redis): void {
    [...this.waiting].forEach((waiter) => waiter.ready(redis));
  }

  /** The connection failed: the waiters that give up at its first error do. */
  failFast(unavailable: (operation: string) => Error): void {
    [...this.waiting].filter((waiter) => waiter.failFast).forEach((waiter) => waiter.fail(unavailable(waiter.operation)));
  }

  failAll(error: Error): void {
    [...this.waiting].forEach((waiter) => waiter.fail(error));
  }
}
