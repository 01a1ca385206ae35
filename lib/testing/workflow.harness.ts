import { buildEnqueueRequest } from '../workflow/enqueue.request';
import { WorkflowMetadataAccessor } from '../discovery/workflow-metadata.accessor';
import { InvalidOptionError, SluiceError, WorkflowDefinitionError, WorkflowFailedError } from '../errors';
import { AttemptRunner, type AttemptOutcome } from '../execution/attempt.runner';
import { describeError } from '../execution/error.info';
import { LazyAbort } from '../execution/lazy.abort';
import { attemptsLeft, backoffDelay } from '../execution/retry.policy';
import { isPositionField } from '../execution/step.recorder';
import { resolveBackoff, resolveQueueOptions } from '../interfaces/queue.options';
import { decodePayload, encodePayload } from '../redis/payload.codec';
import { occurrencesAfter } from '../workflow/cron.plan';
import type { DeclaredSchedule } from '../interfaces/schedule.options';
import { MAX_STEP_ATTEMPTS } from '../workflow/step.options';
import { checkInteger } from '../util/duration';
import type { Jsonified } from '../workflow/json.roundtrip';
import type { BackoffOptions } from '../interfaces/backoff.options';
import type { WorkflowInstance } from '../workflow/workflow.types';
import { FakeClock } from './fake.clock';
import { HarnessAttemptPorts } from './harness.ports';
import type { StepFault } from './harness.recorder';
import type { FailStepOptions, HarnessAttempt, HarnessOptions, HarnessRun, HarnessRunOptions, HarnessScheduleFires } from './harness.types';

/**
 * Runs one `@Workflow` in-process, with no Redis, the way a worker does — through the worker's own
 * attempt runner and retry policy (lib/execution/): each attempt gets the
 * step memo persisted by the attempts before it, steps go through the production step recorder
 * (memo per `name#occurrence`, nested steps part of their parent, the JSON round trip and its
 * errors, the memo budget), and input and result take the same JSON round trip as through Redis.
 * Attempts follow the workflow's `attempts` and `backoff` and the retry rules of the worker
 * (`NonRetryableError` and `InvalidInputError` fail at once). Time is a {@link FakeClock}:
 * delays and backoffs are reported and move it, never slept.
 *
 * Make one with `SluiceTesting.create(WorkflowClass, { providers })` or
 * `SluiceTesting.harness(instance)`.
 */
export class WorkflowHarness<In = unknown, Out = unknown> {
  /** The workflow name. */
  readonly name: string;
  /** Attempts of a run unless `run(…, { attempts })` says otherwise: the workflow's, else `defaults.attempts`. */
  readonly attempts: number;
  /** The backoff between attempts: the workflow's, else `defaults.backoff`. */
  readonly backoff: Required<BackoffOptions>;
  /**
   * The workflow's time limit per attempt (`@Workflow({ timeoutMs })`), if any; `run(…, { runTimeoutMs })`
   * overrides it. Time limits (the run's and steps') are real time, not the fake clock: they
   * bound code that really runs, and end the attempt the way a worker does.
   */
  readonly timeoutMs?: number;
  /** The fake time delays, backoffs and schedules use. */
  readonly clock: FakeClock;
  private readonly faults: StepFault[] = [];
  private readonly schedulesById: Map<string, DeclaredSchedule & { id: string }>;
  private readonly maxPayloadBytes: number;
  private readonly random: () => number;
  private readonly runner: AttemptRunner;

  constructor(
    /** The workflow instance the harness runs. */
    readonly instance: WorkflowInstance<In, Out>,
    options: HarnessOptions = {},
    private readonly onClose?: () => Promise<void>,
  ) {
    const type = (instance as { constructor?: unknown } | null)?.constructor;
    const metadata = new WorkflowMetadataAccessor().getWorkflow(type);
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- no constructor: null, undefined or a primitive from a JS caller
    const className = typeof type === 'function' ? type.name : String(instance);
    if (!metadata) throw new WorkflowDefinitionError(`SluiceTesting: ${className} has no @Workflow decorator (pass an instance of a @Workflow class)`);
    if (typeof instance.run !== 'function') throw new WorkflowDefinitionError(`@Workflow('${metadata.name}') ${className} has no run(input, ctx) method`);
    // The module's own validation and defaults, so the harness cannot disagree with production.
    // The connection only satisfies the validation: nothing connects.
    const resolved = resolveQueueOptions({ connection: { host: 'sluice-testing' }, defaults: options.defaults, maxPayloadBytes: options.maxPayloadBytes, maxRunMemoBytes: options.maxRunMemoBytes });
    this.name = metadata.name;
    this.attempts = metadata.options.attempts ?? resolved.defaults.attempts;
    this.backoff = resolveBackoff(metadata.options.backoff, resolved.defaults.backoff, `@Workflow('${metadata.name}') backoff`);
    this.timeoutMs = metadata.options.timeoutMs;
    this.maxPayloadBytes = resolved.maxPayloadBytes;
    this.runner = new AttemptRunner(resolved);
    this.clock = new FakeClock(options.now);
    this.random = options.random ?? (() => 0.5);
    if (typeof this.random !== 'function') throw new InvalidOptionError('random', 'must be a function like Math.random');
    this.schedulesById = new Map(((metadata.options.schedules ?? []) as Array<DeclaredSchedule & { id: string }>).map((s) => [s.id, s]));
  }

  /**
   * Makes the step `name` throw when it would execute — on every attempt, or on those in
   * `onAttempt`, and on every try of a step retried in place or on those in `onTry` — instead of running (`when: 'before'`, the default) or right after running and
   * before its result is saved (`when: 'after'`). A step replayed from the memo never fails, as in
   * production. Applies to every later `run` until {@link clearFailures}.
   * @example harness.failStep('charge', { onAttempt: 1, error: new Error('gateway timeout') })
   */
  failStep(name: string, options: FailStepOptions = {}): this {
    if (typeof name !== 'string' || name === '') throw new InvalidOptionError('failStep name', 'must be a step name');
    if (options.when !== undefined && options.when !== 'before' && options.when !== 'after') throw new InvalidOptionError('failStep when', `must be 'before' or 'after', got ${String(options.when)}`);
    for (const onTry of options.onTry === undefined ? [] : [options.onTry].flat()) checkInteger(onTry, 'failStep onTry', 1, MAX_STEP_ATTEMPTS);
    this.faults.push({ ...options, name });
    return this;
  }

  /** Removes every failure registered with {@link failStep}. */
  clearFailures(): this {
    this.faults.length = 0;
    return this;
  }

  /**
   * Enqueues a run in-process and runs its attempts until it completes or fails for good, as the
   * worker would. Resolves with the report either way (a failed run is a report with
   * `state: 'failed'`, not a rejection). A `delay` or `runAt` moves the fake clock to the due time.
   * @throws the typed errors `client.enqueue` throws for bad input or options (before anything runs)
   */
  async run(input: In, opts?: HarnessRunOptions): Promise<HarnessRun<Out>> {
    const request = buildEnqueueRequest({ name: this.name, attempts: this.attempts }, input, opts, this.maxPayloadBytes);
    return this.execute(request.id, request.input, request.attempts, request.runAtMs ?? this.clock.now() + request.delayMs, request.runTimeoutMs ?? this.timeoutMs);
  }

  /**
   * The next fire times of the workflow's declared schedules after the fake clock's now, computed
   * as the worker plans them (cron-parser, the schedule's time zone or UTC, `H` seeded by its id).
   */
  schedules(count = 5): HarnessScheduleFires[] {
    return [...this.schedulesById.values()].map((s) => ({
      id: s.id,
      cron: s.cron,
      ...(s.tz !== undefined && { tz: s.tz }),
      input: decodePayload(encodePayload(s.input === undefined ? null : s.input, `schedules.${s.id}.input`, this.maxPayloadBytes)),
      next: this.nextFireTimes(s.id, count),
    }));
  }

  /** The next `count` fire times of one declared schedule (default: the only one) after the fake clock's now. */
  nextFireTimes(scheduleId?: string, count = 5): Date[] {
    const schedule = this.schedule(scheduleId);
    if (!Number.isInteger(count) || count < 1 || count > 1_000) throw new InvalidOptionError('count', `must be an integer 1–1000, got ${count}`);
    return occurrencesAfter({ cron: schedule.cron, tz: schedule.tz, seed: schedule.id }, this.clock.now(), count).map((ms) => new Date(ms));
  }

  /**
   * Fires a declared schedule's next occurrence after the fake clock's now: moves the clock to it
   * and runs the workflow with the schedule's input, under the run id the worker would give it
   * (`<schedule id>@<occurrence ms>`).
   */
  async fireSchedule(scheduleId?: string): Promise<HarnessRun<Out>> {
    const schedule = this.schedule(scheduleId);
    const [at] = occurrencesAfter({ cron: schedule.cron, tz: schedule.tz, seed: schedule.id }, this.clock.now(), 1);
    if (at === undefined) throw new SluiceError(`Schedule "${schedule.id}" has no occurrence after ${this.clock.date().toISOString()}`);
    this.clock.set(at);
    const input = encodePayload(schedule.input === undefined ? null : schedule.input, `schedules.${schedule.id}.input`, this.maxPayloadBytes);
    return this.execute(`${schedule.id}@${at}`, input, this.attempts, at, this.timeoutMs);
  }

  /** Closes the Nest application context `SluiceTesting.create` made (a no-op otherwise). */
  async close(): Promise<void> {
    await this.onClose?.();
  }

  private schedule(scheduleId: string | undefined): DeclaredSchedule & { id: string } {
    const ids = [...this.schedulesById.keys()];
    if (scheduleId === undefined) {
      if (ids.length === 1) return this.schedulesById.get(ids[0])!;
      throw new InvalidOptionError('scheduleId', ids.length === 0 ? `@Workflow('${this.name}') declares no schedules` : `is required: @Workflow('${this.name}') declares ${ids.join(', ')}`);
    }
    const schedule = this.schedulesById.get(scheduleId);
    // (Its cron and time zone were checked when the decorator was evaluated.)
    if (!schedule) throw new InvalidOptionError('scheduleId', `"${scheduleId}" is not a schedule of @Workflow('${this.name}') (it declares ${ids.join(', ') || 'none'})`);
    return schedule;
  }

  /** The worker's loop over one run: claim, execute, then complete, retry after a backoff, fail or hand back. */
  private async execute(runId: string, input: string, maxAttempts: number, dueAtMs: number, limitMs: number | undefined): Promise<HarnessRun<Out>> {
    const enqueuedAt = this.clock.date();
    if (dueAtMs > this.clock.now()) this.clock.set(dueAtMs);
    const memo = new Map<string, string>();
    let attempts: HarnessAttempt[] = [];
    let retryDelaysMs: number[] = [];
    let failures = 0;
    const run = { continued: 0, progress: [] as unknown[] };
    for (let claim = 1; ; claim++) {
      const { report, outcome, continuedWith } = await this.attempt(runId, input, claim, memo, limitMs);
      if (continuedWith !== undefined) {
        // As lua/continue.lua: the same run afresh, with the new input and an empty memo; its
        // attempts and failures start again, its latest progress stays.
        if (report.progress.length > 0) run.progress = report.progress;
        run.continued++;
        input = continuedWith;
        memo.clear();
        attempts = [];
        retryDelaysMs = [];
        failures = 0;
        claim = 0;
        continue;
      }
      attempts.push(report);
      if (outcome.kind === 'completed') {
        return this.finish({ runId, state: 'completed', result: decodePayload<Jsonified<Out>>(outcome.result) }, attempts, failures, maxAttempts, retryDelaysMs, memo, enqueuedAt, dueAtMs, run);
      }
      // As the worker: a RedisConnectionError the run's own code throws is an ordinary failure.
      // (A worker hands the run back only when its own step save could not reach Redis, which
      // the harness's in-memory saves never meet: it reports no 'handed-back' attempt.)
      failures++;
      const error = report.error;
      if (attemptsLeft(outcome.kind === 'failed' && outcome.retryable, failures, maxAttempts)) {
        const delay = backoffDelay(this.backoff, failures, this.random);
        report.outcome = 'retry';
        report.retryDelayMs = delay;
        retryDelaysMs.push(delay);
        this.clock.advance(delay);
        continue;
      }
      report.outcome = 'failed';
      const failure = new WorkflowFailedError(runId, this.name, describeError(error));
      return this.finish({ runId, state: 'failed', error, failure }, attempts, failures, maxAttempts, retryDelaysMs, memo, enqueuedAt, dueAtMs, run);
    }
  }

  /** One attempt through the worker's own runner (lib/execution/attempt.runner.ts), with ports in memory. */
  private async attempt(runId: string, input: string, attempt: number, memo: Map<string, string>, limitMs: number | undefined): Promise<{ report: HarnessAttempt; outcome: AttemptOutcome; continuedWith?: string }> {
    const report: HarnessAttempt = { attempt, startedAt: this.clock.date(), steps: [], executed: [], replayed: [], failed: [], progress: [], stepRetryDelaysMs: [], outcome: 'completed' };
    const ports = new HarnessAttemptPorts(memo, this.clock, this.random, report, [...this.faults], this.maxPayloadBytes);
    // A copy: the memo as shipped with this claim (the recorder adds its own writes to it).
    const claim = { id: runId, workflow: this.name, attempt, input, steps: new Map(memo) };
    const outcome = await this.runner.run(this.instance as WorkflowInstance, claim, limitMs, new LazyAbort(), ports);
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
    attempts: HarnessAttempt[],
    failures: number,
    maxAttempts: number,
    retryDelaysMs: number[],
    memo: Map<string, string>,
    enqueuedAt: Date,
    dueAtMs: number,
    run: { continued: number; progress: unknown[] },
  ): HarnessRun<Out> {
    const decodedMemo: Record<string, unknown> = {};
    // Position entries are the determinism guard's bookkeeping, not step results.
    for (const [key, value] of memo) if (!isPositionField(key)) decodedMemo[key] = decodePayload(value);
    // What `get` shows: the latest value of any attempt (a retry keeps the earlier one until it reports).
    const reported = attempts.filter((a) => a.progress.length > 0).at(-1)?.progress ?? (run.progress.length > 0 ? run.progress : undefined);
    return {
      ...outcome,
      ...(reported && { progress: reported[reported.length - 1] }),
      workflow: this.name,
      continued: run.continued,
      attempts,
      failures,
      maxAttempts,
      retryDelaysMs,
      memo: decodedMemo,
      enqueuedAt,
      dueAt: new Date(Math.max(dueAtMs, enqueuedAt.getTime())),
      finishedAt: this.clock.date(),
    };
  }
}
