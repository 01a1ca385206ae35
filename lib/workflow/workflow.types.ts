import type { DeclaredSchedule } from '../schedule/schedule.options';
import type { Jsonified } from './json.roundtrip';
import type { WorkflowContract } from './workflow.contract';

/** What a workflow's `run` method receives besides its input. */
export interface RunContext {
  /** The run's id (caller-given or generated). */
  readonly runId: string;
  /** 1 on the first attempt, incremented each time the run is claimed again: after a failure, a stall, or a hand-back at shutdown. */
  readonly attempt: number;
  /** Aborted when this worker loses the run's lease or the shutdown deadline passes. */
  readonly signal: AbortSignal;
  /**
   * An inline step: `fn` runs at most once per run and occurrence (the n-th call with the same
   * name is its own step). Its result is persisted before this promise resolves; on a retry the
   * persisted value is returned without calling `fn`. The result must survive a JSON round trip.
   *
   * Called inside another step's `fn` or `@Step` method (at any depth), it is not a step of its
   * own: `fn` runs plainly as part of the parent, takes no occurrence number, is not memoized on
   * its own, and its value is returned as is — the parent's memoized result covers it, and a
   * retry that replays the parent does not call `fn`. Steps started side by side at the top level
   * (e.g. in `Promise.all`) are each a memoized step.
   *
   * Throws `StepMemoLimitError` (failing the run without retry) if the result would take the
   * run's step memo over its byte budget.
   *
   * The promise resolves with the JSON round-tripped value, on the first execution as on a replay,
   * and its type says so: {@link Jsonified}`<T>` (a `Date` comes back as a `string`). A nested call
   * returns `fn`'s value as is at runtime; its type is the round-tripped one all the same, since a
   * call site cannot know whether it runs nested.
   */
  step<T>(name: string, fn: () => Promise<T> | T): Promise<Jsonified<T>>;
}

/** Exponential backoff between attempts: `delayMs * factor^(failures-1)`, capped, with jitter. */
export interface BackoffOptions {
  /** Delay before the first retry, in ms. */
  delayMs: number;
  /** Growth per failure (default 2). */
  factor?: number;
  /** Upper bound of one delay (default 1 hour). */
  maxDelayMs?: number;
}

/** Options of `@Workflow(name, options)`; `In` types the `input` of declared schedules (from a contract). */
export interface WorkflowOptions<In = unknown> {
  /**
   * Fleet-wide cap on runs of this workflow active at once, across every process on this
   * namespace. Stored in Redis at bootstrap by worker processes; omit for no cap.
   */
  concurrency?: number;
  /**
   * Fleet-wide cap on active runs of each group (e.g. tenant) of this workflow — the default for
   * every group; `QueueClient.setLimits({ workflow, group, limit })` overrides it per group.
   * Stored in Redis at bootstrap by worker processes; omit for no per-group cap.
   */
  groupConcurrency?: number;
  /** Attempts before a run fails for good (default: module `defaults.attempts`, else 3). */
  attempts?: number;
  /** Backoff between attempts (default: module `defaults.backoff`, else 1 s doubling, max 1 h). */
  backoff?: BackoffOptions;
  /**
   * Cron schedules that start runs of this workflow. Written to Redis by every worker bootstrap
   * (the latest wins and logs what changed); one removed from here is removed from Redis. See
   * `QueueClient.schedule` for schedules made at runtime.
   */
  schedules?: DeclaredSchedule<In>[];
}

/** The shape every `@Workflow` class has. */
export interface WorkflowInstance<In = any, Out = any> {
  run(input: In, ctx: RunContext): Out | Promise<Out>;
}

/** A `@Workflow` class, used to enqueue with inferred input and output types. */
export type WorkflowClass<In = any, Out = any> = abstract new (...args: any[]) => WorkflowInstance<In, Out>;

/**
 * A class `@Workflow(contract)` accepts: its `run` takes the contract's input (or something
 * wider) and returns its output. A function-typed property rather than a method, so that the
 * input is checked contravariantly: a `run` that needs more than the contract promises fails.
 */
export type ContractImplementation<In, Out> = abstract new (...args: any[]) => {
  run: (input: In, ctx: RunContext) => Out | PromiseLike<Out>;
};

/** Input type of a workflow class (the first parameter of its `run`) or of a contract. */
export type WorkflowInput<W> =
  W extends WorkflowContract<infer I, any> ? I : W extends abstract new (...args: any[]) => { run(input: infer I, ...rest: any[]): any } ? I : unknown;

/** Output type of a workflow class (the awaited return type of its `run`) or of a contract. */
export type WorkflowOutput<W> =
  W extends WorkflowContract<any, infer O> ? O : W extends abstract new (...args: any[]) => { run(...args: any[]): infer O } ? Awaited<O> : unknown;
