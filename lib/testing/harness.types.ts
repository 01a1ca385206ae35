import type { ModuleMetadata, Provider } from '@nestjs/common';
import type { EnqueueOptions } from '../interfaces/enqueue.options';
import type { WorkflowFailedError } from '../errors';
import type { QueueModuleOptions } from '../interfaces/queue.options';
import type { Stored } from '../workflow/payload.types';

/**
 * Options of a harness: the `QueueModule` options that change how a run executes, validated and
 * defaulted exactly as `QueueModule.forRoot` does.
 */
export interface HarnessOptions extends Pick<QueueModuleOptions, 'defaults' | 'maxPayloadBytes' | 'maxRunMemoBytes'> {
  /** Start of the fake clock. Default: the real time when the harness is made. */
  now?: Date | number;
  /**
   * Source of the backoff's ±20 % jitter, like `Math.random`. Default `() => 0.5`: no jitter, so
   * reported delays are the nominal `delayMs × factor^(failures−1)` (capped). Pass `Math.random`
   * to see production's spread.
   */
  random?: () => number;
}

/** The keys of {@link HarnessOptions}. */
export const HARNESS_OPTIONS: readonly string[] = ['defaults', 'maxPayloadBytes', 'maxRunMemoBytes', 'now', 'random'];

/** Options of `SluiceTesting.create`: the providers the workflow needs, plus {@link HarnessOptions}. */
export interface SluiceTestingOptions extends HarnessOptions {
  /** Providers besides the workflow class (its dependencies, or fakes of them). */
  providers?: Provider[];
  /** Modules to import (e.g. a module exporting the workflow's dependencies). */
  imports?: ModuleMetadata['imports'];
}

/** The keys of {@link SluiceTestingOptions}. */
export const SLUICE_TESTING_OPTIONS: readonly string[] = [...HARNESS_OPTIONS, 'providers', 'imports'];

/** A run through the harness: the `EnqueueOptions` that matter in-process, checked as `enqueue` does. */
export type HarnessRunOptions = Pick<EnqueueOptions, 'id' | 'delayMs' | 'delay' | 'runAt' | 'attempts' | 'runTimeoutMs'>;

/** The keys of {@link HarnessRunOptions} (besides `delay`, the old name of `delayMs`). */
export const HARNESS_RUN_OPTIONS: readonly string[] = ['id', 'delayMs', 'runAt', 'attempts', 'runTimeoutMs'];

/** Makes a step fail instead of (or right after) executing. See `WorkflowHarness.failStep`. */
export interface FailStepOptions {
  /** The attempt(s) on which it fails (`ctx.attempt`). Default: every attempt. */
  onAttempt?: number | number[];
  /** Only this occurrence of the step (`charge#2` is occurrence 2). Default: every occurrence. */
  occurrence?: number;
  /**
   * The try (or tries) of the step within an attempt on which it fails, for a step with
   * `attempts` retried in place (the step's `StepContext.attempt`). Default: every try.
   */
  onTry?: number | number[];
  /** What is thrown. Default: an `Error` naming the step and attempt. Throw a `NonRetryableError` to fail the run for good. */
  error?: unknown;
  /**
   * `'before'` (default): the step throws without executing. `'after'`: it executes, then throws
   * before its result is saved, as when a worker dies there; the next attempt executes it again.
   */
  when?: 'before' | 'after';
}

/** The keys of {@link FailStepOptions}. */
export const FAIL_STEP_OPTIONS: readonly string[] = ['onAttempt', 'occurrence', 'onTry', 'error', 'when'];

/** What became of one step call at the top level of an attempt. */
export interface HarnessStepReport {
  /** The memo key, `name#occurrence`. */
  key: string;
  /** The step's name, as given to `@Step` or `ctx.step`. */
  name: string;
  /** Which call of that name in the run this is, 1-based (the `#occurrence` of `key`). */
  occurrence: number;
  /**
   * `executed`: it ran and its result was saved. `replayed`: its saved result was returned
   * without running it. `failed`: it ran (or an injected failure stood in for it) and threw, so
   * nothing was saved. `pending`: the attempt ended (threw elsewhere) while it was still running.
   */
  outcome: 'executed' | 'replayed' | 'failed' | 'pending';
  /** Set only when the step was retried in place (a step with `attempts`): how many times its `fn` was called in this attempt. */
  tries?: number;
}

/** One attempt (claim) of a harness run. */
export interface HarnessAttempt {
  /** `ctx.attempt`. */
  attempt: number;
  /** The fake clock when it started. */
  startedAt: Date;
  /** Top-level step calls in call order. Nested steps are part of their parent and not listed. */
  steps: HarnessStepReport[];
  /** Keys of the steps that executed and were saved. */
  executed: string[];
  /** Keys of the steps replayed from the memo. */
  replayed: string[];
  /** Keys of the steps that threw. */
  failed: string[];
  /**
   * The values `ctx.progress` reported during the attempt, in order, as stored and read back.
   * Every value is listed; a worker writes at most one every 250 ms and may skip values in between.
   */
  progress: unknown[];
  /**
   * The waits between the tries of steps retried in place (steps' `attempts` and `backoff`), in
   * the order they happened: reported and added to the fake clock, never slept.
   */
  stepRetryDelaysMs: number[];
  /**
   * `completed`; `retry` (failed, another attempt follows after `retryDelayMs`); `failed` (failed
   * for good: a `NonRetryableError`, an `InvalidInputError` such as an unserializable result, or
   * the last attempt). `handed-back` is never reported by the harness: a worker hands a run back
   * (no failure counted) only when its own step save could not reach Redis, and the harness saves
   * in memory; a `RedisConnectionError` the run's code throws is an ordinary failure, as in a worker.
   */
  outcome: 'completed' | 'retry' | 'failed' | 'handed-back';
  /** What the attempt threw. */
  error?: unknown;
  /** The backoff before the next attempt (`outcome: 'retry'`): the fake clock moved on by it. */
  retryDelayMs?: number;
}

/** The report of one harness run, from enqueue to its final outcome. */
export interface HarnessRun<Out = unknown> {
  /** The run's id: `HarnessRunOptions.id`, a generated one, or `<schedule id>@<occurrence ms>` for a schedule's fire. */
  runId: string;
  /** The workflow's name. */
  workflow: string;
  /** The final outcome: the harness runs every attempt until the run completes or fails for good. */
  state: 'completed' | 'failed';
  /** The run's result as stored and read back (what `client.run` resolves with), once completed. */
  result?: Stored<Out>;
  /** What the last attempt threw, once failed (the original error, so `instanceof` works). */
  error?: unknown;
  /** What `client.run`/`wait` would reject with, once failed. */
  failure?: WorkflowFailedError;
  /**
   * How many times the run continued as new (`ctx.continueAsNew`). `attempts`, `failures`,
   * `retryDelaysMs` and `memo` are those of its last incarnation, as a worker resets them.
   */
  continued: number;
  /** Every attempt in order (of the last incarnation). */
  attempts: HarnessAttempt[];
  /** Failed attempts (what counts against `attempts`). */
  failures: number;
  /** The attempt limit the run had. */
  maxAttempts: number;
  /** Backoff delays between attempts, in order: reported and added to the fake clock, never slept. */
  retryDelaysMs: number[];
  /** The latest `ctx.progress` value of any attempt (what `QueueClient.get` shows as `progress`); absent if none was reported. */
  progress?: unknown;
  /** The step memo at the end, decoded: `{ 'charge#1': … }`. */
  memo: Record<string, unknown>;
  /** The fake clock at enqueue. */
  enqueuedAt: Date;
  /** When the run was first due: `enqueuedAt`, or later with `delayMs`/`runAt`. */
  dueAt: Date;
  /** The fake clock when the run completed or failed for good. */
  finishedAt: Date;
}

/** A declared schedule's next fire times after the fake clock's now. */
export interface HarnessScheduleFires {
  /** The schedule's id (the workflow's name for its only schedule, unless declared with one). */
  id: string;
  /** A cron schedule's expression (`undefined` for an `every` schedule). */
  cron?: string;
  /** A cron schedule's IANA time zone, if declared (UTC otherwise). */
  tz?: string;
  /** An `every` schedule's interval as declared (`'5m'` or ms). */
  every?: number | string;
  /** An `every` schedule's phase in ms, if declared. */
  offsetMs?: number;
  /** The input of every run it starts (as stored and read back; `null` when it declares none). */
  input: unknown;
  /** Its next fire times after the fake clock's now, earliest first (`count` of them, default 5). */
  next: Date[];
}
