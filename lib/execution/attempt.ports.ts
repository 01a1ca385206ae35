import type { StepRunner } from '../workflow/run.scope';
import type { StepSleep } from './attempt.guard';
import type { OwnCommitFailures } from './commit.failures';
import type { ContinuePort } from './run.continuation';
import type { StepObserver } from './step.observer';
import type { StepRecorder } from './step.recorder';
import type { WaitPort } from './wait.port';

/** What one attempt runs: a claim of a run (a worker's `Claim` is one). */
export interface AttemptSpec {
  id: string;
  workflow: string;
  attempt: number;
  /** The run's input, encoded. */
  input: string;
  /** The run's step memo as claimed; the attempt adds what it writes. */
  steps: Map<string, string>;
  /** How many times the run continued as new: part of its children's derived ids. */
  generation?: number;
}

/**
 * Where one attempt commits what it does: Redis, under the lease token, in a worker
 * (lib/worker/attempt.redis-ports.ts); memory in the testing harness. The attempt's rules — steps,
 * memo, replay, waits, time limits, its outcome — are the runner's (lib/execution/attempt.runner.ts),
 * so both run a workflow alike.
 */
export interface AttemptPorts {
  /** Saves a step's result; resolves false if the attempt may no longer write (its lease is gone). */
  saveStep(key: string, encoded: string): Promise<boolean>;
  /** Where waits and `continueAsNew` commit. Asked on the first of them only: a run that never waits pays nothing. */
  commits(): WaitPort & ContinuePort;
  /** Records a `ctx.progress` value (checked and encoded by the port); never called once the attempt ended. */
  progress(value: unknown): Promise<void>;
  /** The attempt's outcome is decided: nothing more is written for it (a last progress value goes first). */
  ended(): void;
  /** Telemetry of the attempt's steps, when on. */
  readonly observer?: StepObserver;
  /** Where the port notes its commits that could not reach Redis: such a failure hands the run back. */
  readonly commitFailures?: OwnCommitFailures;
  /** How a step waits between tries (default: a real timer). */
  readonly sleep?: StepSleep;
  /** The source of a step backoff's jitter (default `Math.random`). */
  readonly random?: () => number;
  /** The step runner `ctx.step` and `@Step` methods call, around the recorder (default: the recorder). */
  steps?(recorder: StepRecorder): StepRunner;
}
