import type { RunHandle } from './run.handle';

/** Options of `QueueClient.publish`. */
export interface PublishOptions {
  /**
   * The event's id, its idempotency key: a publish of an id already published (by any producer,
   * concurrently too) starts nothing and returns the runs the first one started, while its record
   * is kept (`resultTtlMs`; see docs/triggers.md). Run ids' characters, at most 95 of them.
   * Default: a new unique id (every publish then starts runs).
   */
  id?: string;
  /** The key of the `ctx.waitForEvent(name, { key })` waits it resumes, e.g. an order id; default `''`. */
  key?: string;
}

/** A run an event started: a {@link RunHandle} with its workflow's name. */
export interface PublishedRun extends RunHandle<unknown> {
  /** The name of the subscribed workflow the run belongs to. */
  readonly workflow: string;
}

/** What `QueueClient.publish` did. */
export interface PublishResult {
  /** The event's id (given, or generated). */
  id: string;
  /** The event's name, as given to `publish`. */
  name: string;
  /** `false`: the id was published before, nothing was written, and `runs` are the runs it started then. */
  published: boolean;
  /**
   * One run per workflow subscribed to the name (in name order), with ids
   * `evt:<event id>:<workflow>`; `created` is `false` for every run of a repeated publish.
   */
  runs: PublishedRun[];
  /** Runs waiting in `ctx.waitForEvent(name, { key })` that this publish resumed (0 for a repeat). */
  resumed: number;
}

/** A published event as its record keeps it (`QueueClient.getEvent`, `listEvents`). */
export interface PublishedEvent {
  /** The event's id (given to `publish`, or generated). */
  id: string;
  /** The event's name. */
  name: string;
  /** When the first publish of the id wrote the record (Redis clock). */
  publishedAt: Date;
  /** The runs it started, by workflow. */
  runs: Array<{ workflow: string; runId: string }>;
}

/** Options of `QueueClient.listEvents`. */
export interface ListEventsOptions {
  /** The event name. */
  name: string;
  /** Most events to return, newest first (1 to 100; default 20). */
  limit?: number;
}

/** The keys of {@link PublishOptions}. */
export const PUBLISH_OPTIONS: readonly string[] = ['id', 'key'];
/** The keys of {@link ListEventsOptions}. */
export const LIST_EVENTS_OPTIONS: readonly string[] = ['name', 'limit'];
