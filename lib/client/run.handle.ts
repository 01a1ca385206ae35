import type { WaitOptions } from './wait.options';

/** A handle on an enqueued run. */
export interface RunHandle<Out = unknown> {
  readonly id: string;
  /** `false` when the id already existed and the existing run was returned (idempotent enqueue). */
  readonly created: boolean;
  /** Waits for the run's result; see {@link QueueClient.wait}. */
  result(opts?: WaitOptions): Promise<Out>;
}
