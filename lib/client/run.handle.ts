import type { DedupeResult } from '../interfaces/dedupe.options';
import type { WaitOptions } from './wait.options';

/** A handle on an enqueued run. */
export interface RunHandle<Out = unknown> {
  /** The run's id; with a dedupe, the window's run, which another enqueue may have created. */
  readonly id: string;
  /** `false` when the id already existed and the existing run was returned (idempotent enqueue), or the enqueue was folded into a dedupe window's run. */
  readonly created: boolean;
  /** Only for an enqueue with a dedupe (`EnqueueOptions.dedupe` or the `@Workflow`'s): what the window made of it. */
  readonly dedupe?: DedupeResult;
  /** Waits for the run's result; see {@link QueueClient.wait}. */
  result(opts?: WaitOptions): Promise<Out>;
}
