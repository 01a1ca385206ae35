/** An attempt of a run starts in this process (its claim is committed in Redis). */
export interface RunActiveEvent {
  /** The run's id. */
  runId: string;
  /** The run's workflow name. */
  workflow: string;
  /** The attempt that starts (1-based). */
  attempt: number;
}

/** What a worker reports once a run's outcome is committed in Redis. */
export interface RunOutcomeEvent {
  /** The run's id. */
  runId: string;
  /** The run's workflow name. */
  workflow: string;
  /** The attempt that ended (1-based). */
  attempt: number;
  /** Time spent executing this attempt, in ms. */
  durationMs: number;
}

/** An attempt failed (committed). `failed` fires for every failed attempt; see `willRetry`. */
export interface RunFailedEvent extends RunOutcomeEvent {
  /** The error the attempt failed with. */
  error: {
    /** Its class name (`error.name`), e.g. `TimeoutError`. */
    name: string;
    /** Its message. */
    message: string;
  };
  /** `true` when another attempt follows, `false` when the run failed for good. */
  willRetry: boolean;
}

/** An attempt failed and another follows: the `failed` event's payload narrowed, plus the backoff. */
export interface RunRetryingEvent extends RunFailedEvent {
  /** Always `true`: another attempt follows. */
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
  /** The run's id. */
  runId: string;
  /** The run's workflow name. */
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

/** The events of `RunEvents` and `@OnWorkflowEvent`. */
export type RunEventName = keyof RunEventMap;

/** The payload of one event, e.g. `RunEventPayload<'failed'>` is {@link RunFailedEvent}. */
export type RunEventPayload<E extends RunEventName> = RunEventMap[E][0];

/** Every event name, for checks at decoration time. */
export const RUN_EVENT_NAMES: readonly RunEventName[] = ['active', 'completed', 'failed', 'retrying', 'stalled', 'suspended'];
