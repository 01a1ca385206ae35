import { WorkflowFailedError } from '../errors';
import { AttemptRunner, type AttemptOutcome } from '../execution/attempt.runner';
import { describeError } from '../execution/error.info';
import { LazyAbort } from '../execution/lazy.abort';
import { attemptsLeft, backoffDelay } from '../execution/retry.policy';
import { isPositionField } from '../execution/step.recorder';
import type { BackoffOptions } from '../interfaces/backoff.options';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { decodePayload } from '../redis/payload.codec';
import type { Stored } from '../workflow/payload.types';
import type { WorkflowInstance } from '../workflow/workflow.types';
import type { WorkflowSchemas } from '../workflow/schema.validate';
import type { FakeClock } from './fake.clock';
import { HarnessAttemptPorts } from './harness.ports';
import type { StepFault } from './harness.recorder';
import type { HarnessAttempt, HarnessRun } from './harness.types';

/** One run as the harness starts it. */
export interface HarnessRunStart {
  runId: string;
  /** The encoded input. */
  input: string;
  maxAttempts: number;
  dueAtMs: number;
  /** The time limit per attempt, if any. */
  limitMs: number | undefined;
}

/** What the harness's workflow gives the loop. */
export interface HarnessRunLoopConfig {
  name: string;
  instance: WorkflowInstance;
  options: ResolvedQueueOptions;
  backoff: Required<BackoffOptions>;
  clock: FakeClock;
  random: () => number;
  /** The step failures registered on the harness (read at each attempt). */
  faults: readonly StepFault[];
  /** The workflow's schemas: each attempt validates with them, as a worker's does. */
  schemas?: WorkflowSchemas;
}

/** The state of one run across its attempts; continueAsNew starts it afresh. */
class RunState {
  memo = new Map<string, string>();
  attempts: HarnessAttempt[] = [];
  retryDelaysMs: number[] = [];
  failures = 0;
  continued = 0;
  /** The latest progress of the run before its last continueAsNew. */
  progress: unknown[] = [];

  /** As lua/continue.lua: the same run afresh, its latest progress kept. */
  continueAsNew(last: HarnessAttempt): void {
    if (last.progress.length > 0) this.progress = last.progress;
    this.continued++;
    this.memo.clear();
    this.attempts = [];
    this.retryDelaysMs = [];
    this.failures = 0;
  }
}

/**
 * The worker's loop over one run, in memory: claim, execute through the worker's own attempt
 * runner, then complete, retry after a backoff (moving the fake clock), or fail for good.
 */
export class HarnessRunLoop<Out> {
  private readonly runner: AttemptRunner;

  constructor(private readonly config: HarnessRunLoopConfig) {
    this.runner = new AttemptRunner(config.options);
  }

  async execute(start: HarnessRunStart): Promise<HarnessRun<Out>> {
    const { clock } = this.config;
    const enqueuedAt = clock.date();
    if (start.dueAtMs > clock.now()) clock.set(start.dueAtMs);
    const run = new RunState();
    let input = start.input;
    for (let claim = 1; ; claim++) {
      const { report, outcome, continuedWith } = await this.attempt(start, input, claim, run.memo);
      if (continuedWith !== undefined) {
        run.continueAsNew(report);
        input = continuedWith;
        claim = 0;
        continue;
      }
      run.attempts.push(report);
      if (outcome.kind === 'completed') {
        return this.finish(
          { runId: start.runId, state: 'completed', result: decodePayload<Stored<Out>>(outcome.result) },
          run,
          start,
          enqueuedAt,
        );
      }
      // As the worker: a RedisConnectionError the run's own code throws is an ordinary failure.
      // A worker hands a run back only when its own commit could not reach Redis, which the
      // harness's in-memory saves never meet.
      run.failures++;
      if (attemptsLeft(outcome.kind === 'failed' && outcome.retryable, run.failures, start.maxAttempts)) {
        const delay = backoffDelay(this.config.backoff, run.failures, this.config.random);
        report.outcome = 'retry';
        report.retryDelayMs = delay;
        run.retryDelaysMs.push(delay);
        clock.advance(delay);
        continue;
      }
      report.outcome = 'failed';
      const failure = new WorkflowFailedError(start.runId, this.config.name, describeError(report.error));
      return this.finish({ runId: start.runId, state: 'failed', error: report.error, failure }, run, start, enqueuedAt);
    }
  }

  private async attempt(
    start: HarnessRunStart,
    input: string,
    attempt: number,
    memo: Map<string, string>,
  ): Promise<{ report: HarnessAttempt; outcome: AttemptOutcome; continuedWith?: string }> {
    const { clock, random, faults, options, name, instance, schemas } = this.config;
    const report: HarnessAttempt = {
      attempt,
      startedAt: clock.date(),
      steps: [],
      executed: [],
      replayed: [],
      failed: [],
      progress: [],
      stepRetryDelaysMs: [],
      outcome: 'completed',
    };
    const ports = new HarnessAttemptPorts(memo, clock, random, report, [...faults], options.maxPayloadBytes);
    // A copy: the memo as shipped with this claim (the recorder adds its own writes to it).
    const claim = { id: start.runId, workflow: name, attempt, input, steps: new Map(memo) };
    const outcome = await this.runner.run(instance, claim, start.limitMs, new LazyAbort(), ports, schemas);
    if (outcome.kind === 'continued') return { report, outcome, continuedWith: ports.continuedWith };
    if (outcome.kind !== 'completed') {
      report.outcome = 'failed';
      report.error = (outcome as { error?: unknown }).error;
    }
    report.steps = report.steps.map((step) => ({ ...step }));
    for (const step of report.steps) {
      if (step.outcome === 'executed') report.executed.push(step.key);
      else if (step.outcome === 'replayed') report.replayed.push(step.key);
      else if (step.outcome === 'failed') report.failed.push(step.key);
    }
    return { report, outcome };
  }

  private finish(
    outcome: Pick<HarnessRun<Out>, 'runId' | 'state' | 'result' | 'error' | 'failure'>,
    run: RunState,
    start: HarnessRunStart,
    enqueuedAt: Date,
  ): HarnessRun<Out> {
    const memo: Record<string, unknown> = {};
    // Position entries are the determinism guard's bookkeeping, not step results.
    for (const [key, value] of run.memo) if (!isPositionField(key)) memo[key] = decodePayload(value);
    // What `get` shows: the latest value of any attempt (a retry keeps the earlier one until it reports).
    const reported =
      run.attempts.filter((a) => a.progress.length > 0).at(-1)?.progress ?? (run.progress.length > 0 ? run.progress : undefined);
    return {
      ...outcome,
      ...(reported && { progress: reported[reported.length - 1] }),
      workflow: this.config.name,
      continued: run.continued,
      attempts: run.attempts,
      failures: run.failures,
      maxAttempts: start.maxAttempts,
      retryDelaysMs: run.retryDelaysMs,
      memo,
      enqueuedAt,
      dueAt: new Date(Math.max(start.dueAtMs, enqueuedAt.getTime())),
      finishedAt: this.config.clock.date(),
    };
  }
}
