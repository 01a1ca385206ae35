import type { DeclaredSchedule } from '../interfaces/schedule.options';
import type { Stored } from './payload.types';
import type { RateLimit } from '../interfaces/rate-limit';
import type { StepCallOptions, StepFn } from './step.options';
import type { WorkflowContract } from './workflow.contract';
import type { SchemaInput, SchemaOutput, StandardSchemaV1 } from './standard-schema';
import type { Duration } from '../util/duration';
import type { BackoffOptions } from '../interfaces/backoff.options';
import type { WorkflowDedupeOptions } from '../interfaces/dedupe.options';
import type { BatchOptions } from './batch.options';
import type { EventWaitOptions, InvokeCall, InvokeOptions, SignalWaitOptions, WaitOutcome } from './wait.types';

/** A workflow `ctx.invoke` starts: its class or contract (types inferred), or its name. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any contract, whatever its input and output types; public API (API report)
export type InvokeTarget = WorkflowClass | WorkflowContract<any, any> | string;

/**
 * What a workflow's `run` method receives besides its input. `In`, the workflow's input type,
 * types {@link RunContext.continueAsNew}: write `ctx: RunContext<MyInput>` to have it checked.
 */
export interface RunContext<In = unknown> {
  /** The run's id (caller-given or generated). */
  readonly runId: string;
  /** 1 on the first attempt, incremented each time the run is claimed again: after a failure, a stall, or a hand-back at shutdown. */
  readonly attempt: number;
  /**
   * Aborted when this worker loses the run's lease or the shutdown deadline passes, and with a
   * `TimeoutError` when the attempt runs past its time limit or a step's final try past its own.
   */
  readonly signal: AbortSignal;
  /**
   * An inline step: `fn` runs at most once per run and occurrence (the n-th call with the same
   * name is its own step). Its result is persisted before this promise resolves; on a retry the
   * persisted value is returned without calling `fn`. The result must be a value a payload keeps (see {@link Stored}).
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
   * `fn` may take a `StepContext` `{ signal, attempt }`: the step's own signal (aborted on
   * the step's time limit or with `ctx.signal`) and its try number. `options` (see
   * {@link StepCallOptions}) bound each try with `timeoutMs` and retry a failing `fn` in place
   * (`attempts`, `backoff`) before the run attempt fails; they are checked at the call
   * (`InvalidOptionError`, nothing written) and ignored for a nested step.
   *
   * The promise resolves with the value as stored and read back, on the first execution as on a
   * replay, and its type says so: {@link Stored}`<T>` (a class instance comes back a plain object). A nested call
   * returns `fn`'s value as is at runtime; its type is the round-tripped one all the same, since a
   * call site cannot know whether it runs nested.
   */
  step<T>(name: string, fn: StepFn<T>, options?: StepCallOptions): Promise<Stored<T>>;
  /**
   * Reports the run's progress: a small JSON value (e.g. `{ done: 40, total: 100 }`) stored on
   * the run — `QueueClient.get` returns it as `progress` — and sent to waiters that asked for it
   * (`wait(runId, { onProgress })`). Advisory: it is not memoized, and never fails the run.
   *
   * Throttled per run: at most one Redis write every 250 ms, and the latest value wins — values
   * reported in between may be skipped, the last one is written in the next slot, or, if the
   * attempt ends first, right before its outcome is stored (the outcome does not wait for it).
   * The promise resolves once this value or a later one is written, or was dropped (Redis failed:
   * logged, throttled; or the lease was lost). Calls after the attempt ended (code that ignored
   * its signal past a timeout) write nothing. The value stays on the run after it finishes and
   * across its attempts, until a later value replaces it.
   *
   * Rejects before any write with `PayloadNotSerializableError` for a value a payload cannot
   * keep (or `undefined`; pass `null`), and `PayloadTooLargeError` beyond
   * `MAX_PROGRESS_BYTES` (16 KiB) encoded.
   */
  progress(value: unknown): Promise<void>;
  /**
   * A durable sleep: the run gives up its lease and every slot, and resumes — on any worker, by
   * replaying its memoized steps — once `duration` (ms, or e.g. `'2h'`) has passed on Redis's
   * clock. A sleep is a step: `name` is its memo name, and on replay it returns at once. It counts
   * neither as a failure nor against `attempts` (`ctx.attempt` does grow: it counts claims).
   * Sleeps, waits and invokes run one after the other even when started side by side.
   */
  sleep(name: string, duration: Duration): Promise<void>;
  /** {@link sleep} until a date (compared with Redis's clock); a past date returns at once. */
  sleepUntil(name: string, until: Date): Promise<void>;
  /**
   * Waits, holding no slot, for `QueueClient.signal(runId, name, payload)`. A signal sent before
   * the run reaches this wait is kept in the run's mailbox (up to 100, oldest first per name) and
   * taken here at once. With `timeoutMs`, resolves `{ timedOut: true }` when it passes — a result,
   * not an error — and a later signal goes to the mailbox. Memoized like a step.
   */
  waitForSignal<T = unknown>(name: string, opts?: SignalWaitOptions): Promise<WaitOutcome<T>>;
  /**
   * Waits, holding no slot, for `QueueClient.sendEvent(name, { key, payload })`, which resumes
   * every run waiting on that name and key. Only events sent while the run waits count (an event
   * is not stored). With `timeoutMs`, resolves `{ timedOut: true }` when it passes.
   */
  waitForEvent<T = unknown>(name: string, opts?: EventWaitOptions): Promise<WaitOutcome<T>>;
  /**
   * Starts a child run and waits for its result holding no slot. The child's id is `opts.id`, or
   * derived from this run's id and the call's memo key, so a replay never starts it twice.
   * Throws `ChildWorkflowFailedError` (catchable, the same on every replay) if the child failed
   * for good or was cancelled; uncaught, it fails this run for good at once (see
   * `QueueClient.retry` to re-drive it). Cancelling this run cancels the children it waits for.
   */
  invoke<W extends InvokeTarget>(
    workflow: W,
    input: W extends string ? unknown : WorkflowInput<W>,
    opts?: InvokeOptions,
  ): Promise<W extends string ? unknown : Stored<WorkflowOutput<W>>>;
  /** Starts every child (at most 1,000), waits for all, and resolves with their results in call order; throws the first failure in call order. */
  invokeAll<T = unknown>(calls: InvokeCall[]): Promise<Stored<T>[]>;
  /**
   * Ends this execution of the run and starts it afresh, under the same id, with `input` and an
   * empty memo — how a workflow that loops for ever (a poller, an entity) keeps its memo, and so
   * each claim, bounded. In one script call: the memo and the attempts' timeline are deleted, the
   * input replaced, `attempt` goes back to 1 (and failures to 0), and the run gives up its lease
   * and every slot and is due again at once, at the back of its priority. Its id, group, priority,
   * time limit, mailbox (signals not yet taken) and parent stay; nothing is published, so a
   * waiter (`run`, `wait`, a parent's `invoke`) gets the outcome of the last incarnation.
   *
   * A top-level call like a wait: steps executing now are saved first; calls made after it never
   * run; the promise never settles (the attempt is over once it is committed). Inside a step's
   * `fn` it is an `InvalidInputError` that fails the run. `input` is checked like an enqueue's
   * (`PayloadNotSerializableError`, `PayloadTooLargeError`) before anything is written.
   */
  continueAsNew(input: In): Promise<never>;
}

/** The batch a batch workflow's `run` is called with (see {@link BatchContext}). */
export interface BatchInfo {
  /** The batch run's id (also `ctx.runId`). */
  readonly id: string;
  /** The member run ids, in the order of the inputs. */
  readonly memberIds: readonly string[];
}

/**
 * The `ctx` of a batch workflow's `run(inputs, ctx)` (`@Workflow(name, { batch })`, see
 * docs/batches.md): a run context of the batch run — steps are memoized per batch, waits suspend
 * the whole batch — with the batch's members. Typing `ctx` as `BatchContext` is also what tells
 * the compiler that the class batches: `client.run(Class, input)` then takes one member's input
 * and resolves with that member's result. `continueAsNew` is refused (a batch's inputs are its
 * members'): it fails the batch without retries.
 */
export interface BatchContext<In = unknown> extends RunContext<In> {
  /** The batch this attempt runs: its id and its members', in the order of the inputs. */
  readonly batch: BatchInfo;
}

/** Options of `@Workflow(name, options)`; `In` types the `input` of declared schedules (from a contract). */
export interface WorkflowOptions<In = unknown> {
  /**
   * Fleet-wide cap on runs of this workflow active at once, across every process on this
   * namespace. Stored in Redis at bootstrap by worker processes; omit for no cap. A value set at
   * runtime with `QueueClient.setLimits` stays until this declaration changes.
   */
  concurrency?: number;
  /**
   * Fleet-wide cap on active runs of each group (e.g. tenant) of this workflow — the default for
   * every group; `QueueClient.setLimits({ workflow, group, limit })` overrides it per group.
   * Stored in Redis at bootstrap by worker processes; omit for no per-group cap.
   */
  groupConcurrency?: number;
  /**
   * Index this workflow's completed runs in finish order, so `listRuns({ state: 'completed' })`
   * can page them (failed and cancelled runs are always indexed). Costs two Redis commands per
   * finishing script call (not per run); implied by `keep.completed`. Written to Redis by every
   * worker bootstrap. Default `false`.
   */
  indexCompleted?: boolean;
  /**
   * Fleet-wide rate limit on starts of this workflow: at most `max` runs start in any `perMs`
   * window, across every process (see {@link RateLimit}). Stored in Redis at bootstrap by worker
   * processes (the latest wins); `QueueClient.setLimits({ workflow, rateLimit })` changes it at
   * runtime, until this declaration changes. Workers held back by it sleep until the window frees: no polling.
   */
  rateLimit?: RateLimit;
  /**
   * Fleet-wide rate limit on starts of each group of this workflow — the default for every group;
   * `QueueClient.setLimits({ workflow, group, rateLimit })` overrides it per group.
   */
  groupRateLimit?: RateLimit;
  /** Attempts before a run fails for good (default: module `defaults.attempts`, else 3). */
  attempts?: number;
  /** Backoff between attempts (default: module `defaults.backoff`, else 1 s doubling, max 1 h). */
  backoff?: BackoffOptions;
  /**
   * Time limit of each attempt of a run, in ms (1 to 2^31 − 1), from the moment a worker starts
   * it; an enqueue's `runTimeoutMs` overrides it for its run. When it runs out, `ctx.signal`
   * aborts with a `TimeoutError` and the attempt fails at once with it (retried like any
   * failure), freeing the run's slots without waiting for code that ignores its signal — that
   * code keeps running in the background, and its later step writes and result are refused.
   * Default: none (no timer is set).
   */
  timeoutMs?: number;
  /**
   * Cron schedules that start runs of this workflow. Written to Redis by every worker bootstrap
   * (the latest wins and logs what changed); one removed from here is removed from Redis by the
   * bootstraps of this code, not by those of an older version still running (docs/schedules.md). See
   * `QueueClient.schedule` for schedules made at runtime.
   */
  schedules?: DeclaredSchedule<In>[];
  /**
   * Retention by count, besides `resultTtlMs`: keep at most the newest `completed` completed runs
   * and `failed` failed runs of this workflow (integers >= 0; omit one for no count limit). Older
   * ones are deleted oldest first, their ids free to be enqueued again, in bounded work per
   * finishing call (at most twice the runs it finished plus 64), so exactly the newest N remain
   * once runs stop finishing. Stored in Redis (limits hash) by every worker bootstrap, fleet-wide:
   * the latest bootstrap wins.
   */
  keep?: RetentionByCount;
  /**
   * A Standard Schema (zod, valibot, arktype…) of the input. Producers of this application
   * (`enqueue`, `run`, `enqueueMany`, schedules, `ctx.invoke`, `continueAsNew`) validate the input
   * with it before any Redis call (`InputValidationError`, nothing written) and store it as given;
   * the worker validates the stored input again before each attempt's `run` — which receives the
   * schema's output (transforms and defaults applied) — and fails the run without retries if it
   * is refused (a producer without the schema, or with an older one). The schema sees the input
   * after its JSON round trip: it must accept what JSON gives back (e.g. a date as a string).
   * With a contract, the contract's (set it on `defineWorkflow`).
   */
  input?: StandardSchemaV1;
  /**
   * A Standard Schema of what `run` returns: the worker validates the result with it and stores
   * the schema's output; a refused result fails the run without retries (`OutputValidationError`).
   * With a contract, the contract's.
   */
  output?: StandardSchemaV1;
  /**
   * The default dedupe of this workflow's enqueues by class (`enqueue`, `run`): runs are folded
   * together per `key(input)` for a window, as `EnqueueOptions.dedupe` does (see
   * {@link WorkflowDedupeOptions}, docs/dedupe.md). An enqueue's own `dedupe` wins over it whole,
   * and `dedupe: false` turns it off; an enqueue by name or contract, `enqueueMany` (refused unless
   * each item says `dedupe: false`), `ctx.invoke` and schedules do not use it.
   */
  dedupe?: WorkflowDedupeOptions<In>;
  /**
   * Event names this workflow is subscribed to: `QueueClient.publish(event, payload)` starts one
   * run of it per event (the payload is the run's input), idempotently by the event id. Written to
   * Redis at bootstrap by worker processes (the latest bootstrap wins; a name dropped here is
   * unsubscribed), so producers without this class publish to it too. See docs/triggers.md.
   */
  on?: string | readonly string[];
  /**
   * Which events start a run: evaluated by the worker at the start of each attempt of a run that
   * an event started (after the `input` schema), never by the publisher. A run it refuses ends
   * `completed` with result `undefined` without calling `run`, its timeline showing the step
   * `event-filter`. Must be a pure function of the payload. Only with `on`. A method signature, so
   * that a filter typed for the payload fits a workflow whose input type is `unknown`.
   */
  filter?(this: void, payload: In): boolean;
  /**
   * Runs of this workflow are members of batches, and `run(inputs, ctx)` gets a whole batch's
   * inputs at once — typed `(inputs: In[], ctx: BatchContext)` — and returns one result per input,
   * in their order (see {@link BatchOptions} and docs/batches.md). Each member keeps its own run
   * id, result and waiters; a batch is a run of its own of the workflow `<name>.batch`, retried
   * and capped as one (`concurrency` counts batches). Not with `schedules`, `input` or `output`.
   */
  batch?: BatchOptions<In>;
}

/** `@Workflow({ keep })`: how many finished runs of each outcome to keep at most. */
export interface RetentionByCount {
  /** Most completed runs of the workflow to keep, the newest (an integer >= 0); omit for no count limit. */
  completed?: number;
  /** Most failed runs of the workflow to keep, the newest (an integer >= 0); omit for no count limit. */
  failed?: number;
}

/** The shape every `@Workflow` class has. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- defaults for 'some workflow': unknown would reject run(input: Foo) under strictFunctionTypes and break inference at call sites; public API
export interface WorkflowInstance<In = any, Out = any> {
  /** Runs one attempt of a run: `input` is the run's input, `ctx` its context; returns the run's result. */
  run(input: In, ctx: RunContext<In>): Out | Promise<Out>;
}

/** A `@Workflow` class, used to enqueue with inferred input and output types. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any class, whatever its constructor takes (Nest injects it); public API
export type WorkflowClass<In = any, Out = any> = abstract new (...args: any[]) => WorkflowInstance<In, Out>;

/**
 * A class `@Workflow(contract)` accepts: its `run` takes the contract's input (or something
 * wider) and returns its output. A function-typed property rather than a method, so that the
 * input is checked contravariantly: a `run` that needs more than the contract promises fails.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any class, whatever its constructor takes (Nest injects it); public API
export type ContractImplementation<In, Out> = abstract new (...args: any[]) => {
  run: (input: In, ctx: RunContext) => Out | PromiseLike<Out>;
};

/**
 * A class `@Workflow(name, { input, output })` accepts: its `run` takes the input schema's output
 * type (or something wider) and returns the output schema's input type. Checked as
 * {@link ContractImplementation}; without one of the schemas that side is not checked, nor is the
 * input when the schema's output type is `unknown` (options typed as plain `WorkflowOptions`).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any class, whatever its constructor takes (Nest injects it); public API
export type SchemaImplementation<I, O> = abstract new (...args: any[]) => {
  run: (
    input: unknown extends SchemaOutput<I, never> ? never : SchemaOutput<I, never>,
    ctx: RunContext<SchemaInput<I>>,
  ) => SchemaInput<O> | PromiseLike<SchemaInput<O>>;
};

/* eslint-disable @typescript-eslint/no-explicit-any -- any in infer patterns matches every contract and run signature; public API */
/**
 * Input type of a workflow class (the first parameter of its `run`) or of a contract. For a batch
 * workflow (its `run` takes `ctx: BatchContext`), one member's: an element of the inputs array.
 */
export type WorkflowInput<W> =
  W extends WorkflowContract<infer I, any, any, any>
    ? I
    : W extends abstract new (...args: any[]) => { run(input: infer I, ctx: infer C, ...rest: any[]): any }
      ? Member<I, C>
      : unknown;

/**
 * Output type of a workflow class (the awaited return type of its `run`) or of a contract. For a
 * batch workflow, one member's: an element of the results array.
 */
export type WorkflowOutput<W> =
  W extends WorkflowContract<any, infer O, any, any>
    ? O
    : W extends abstract new (...args: any[]) => { run(input: any, ctx: infer C, ...rest: any[]): infer O }
      ? Member<Awaited<O>, C>
      : unknown;

/** `T` as one member's of a batch workflow (whose `run` takes `ctx: BatchContext`): the element type of the array `T`. */
type Member<T, C> = [C] extends [BatchContext<any>] ? (T extends readonly (infer E)[] ? E : T) : T;
/* eslint-enable @typescript-eslint/no-explicit-any */
