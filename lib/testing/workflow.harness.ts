import { buildEnqueueRequest } from '../workflow/enqueue.request';
import { checkInput, type WorkflowSchemas } from '../workflow/schema.validate';
import { WorkflowMetadataAccessor } from '../discovery/workflow-metadata.accessor';
import { InvalidOptionError, WorkflowDefinitionError } from '../errors';
import { resolveBackoff, resolveQueueOptions } from '../interfaces/queue.options';
import { MAX_STEP_ATTEMPTS } from '../workflow/step.options';
import { checkInteger } from '../util/duration';
import type { BackoffOptions } from '../interfaces/backoff.options';
import type { WorkflowInstance } from '../workflow/workflow.types';
import { FakeClock } from './fake.clock';
import type { StepFault } from './harness.recorder';
import { HarnessRunLoop } from './harness.run-loop';
import { HarnessSchedules } from './harness.schedules';
import { checkOptionKeys } from '../util/option-keys';
import {
  FAIL_STEP_OPTIONS,
  HARNESS_OPTIONS,
  HARNESS_RUN_OPTIONS,
  type FailStepOptions,
  type HarnessOptions,
  type HarnessRun,
  type HarnessRunOptions,
  type HarnessScheduleFires,
} from './harness.types';

/**
 * Runs one `@Workflow` in-process, with no Redis, the way a worker does — through the worker's own
 * attempt runner and retry policy (lib/execution/): each attempt gets the
 * step memo persisted by the attempts before it, steps go through the production step recorder
 * (memo per `name#occurrence`, nested steps part of their parent, the JSON round trip and its
 * errors, the memo budget), and input and result take the same JSON round trip as through Redis.
 * Attempts follow the workflow's `attempts` and `backoff` and the retry rules of the worker
 * (`NonRetryableError` and `InvalidInputError` fail at once). The workflow's schemas validate as
 * in production: `run`'s input first as `client.enqueue` does (a refused input throws
 * `InputValidationError`), then in each attempt, and the result (`OutputValidationError`). Time is a {@link FakeClock}:
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
  private readonly maxPayloadBytes: number;
  private readonly declaredSchedules: HarnessSchedules;
  private readonly loop: HarnessRunLoop<Out>;
  private readonly schemas: WorkflowSchemas;

  constructor(
    /** The workflow instance the harness runs. */
    readonly instance: WorkflowInstance<In, Out>,
    options: HarnessOptions = {},
    private readonly onClose?: () => Promise<void>,
  ) {
    // (`SluiceTesting.create` checked its own options' keys already.)
    checkOptionKeys(options, HARNESS_OPTIONS, 'harness options');
    const type = (instance as { constructor?: unknown } | null)?.constructor;
    const metadata = new WorkflowMetadataAccessor().getWorkflow(type);
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- no constructor: null, undefined or a primitive from a JS caller
    const className = typeof type === 'function' ? type.name : String(instance);
    if (!metadata)
      throw new WorkflowDefinitionError(`SluiceTesting: ${className} has no @Workflow decorator (pass an instance of a @Workflow class)`);
    if (typeof instance.run !== 'function')
      throw new WorkflowDefinitionError(`@Workflow('${metadata.name}') ${className} has no run(input, ctx) method`);
    // The module's own validation and defaults, so the harness cannot disagree with production.
    // The connection only satisfies the validation: nothing connects.
    const { defaults, maxPayloadBytes, maxRunMemoBytes } = options;
    const resolved = resolveQueueOptions(
      { connection: { host: 'sluice-testing' }, defaults, maxPayloadBytes, maxRunMemoBytes },
      'harness options',
    );
    this.name = metadata.name;
    this.attempts = metadata.options.attempts ?? resolved.defaults.attempts;
    this.backoff = resolveBackoff(metadata.options.backoff, resolved.defaults.backoff, `@Workflow('${metadata.name}') backoff`);
    this.timeoutMs = metadata.options.timeoutMs;
    this.maxPayloadBytes = resolved.maxPayloadBytes;
    this.clock = new FakeClock(options.now);
    const random = options.random ?? (() => 0.5);
    if (typeof random !== 'function') throw new InvalidOptionError('random', 'must be a function like Math.random');
    this.schemas = { input: metadata.options.input, output: metadata.options.output };
    this.declaredSchedules = new HarnessSchedules(this.name, metadata.options.schedules, this.clock, this.maxPayloadBytes);
    const config = {
      name: this.name,
      instance: instance as WorkflowInstance,
      options: resolved,
      backoff: this.backoff,
      clock: this.clock,
      random,
      faults: this.faults,
      schemas: this.schemas,
    };
    this.loop = new HarnessRunLoop(config);
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
    if (options === null || typeof options !== 'object') throw new InvalidOptionError('failStep options', 'must be an object');
    checkOptionKeys(options, FAIL_STEP_OPTIONS, 'failStep options');
    if (options.when !== undefined && options.when !== 'before' && options.when !== 'after')
      throw new InvalidOptionError('failStep when', `must be 'before' or 'after', got ${String(options.when)}`);
    for (const onTry of options.onTry === undefined ? [] : [options.onTry].flat())
      checkInteger(onTry, 'failStep onTry', 1, MAX_STEP_ATTEMPTS);
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
   * `state: 'failed'`, not a rejection). A `delayMs` or `runAt` moves the fake clock to the due time.
   * @throws the typed errors `client.enqueue` throws for bad input or options (before anything runs)
   */
  async run(input: In, opts?: HarnessRunOptions): Promise<HarnessRun<Out>> {
    const request = buildEnqueueRequest(
      { name: this.name, attempts: this.attempts },
      input,
      opts,
      this.maxPayloadBytes,
      HARNESS_RUN_OPTIONS,
    );
    const checking = checkInput({ name: this.name, input: this.schemas.input }, input);
    if (checking) await checking;
    const dueAtMs = request.runAtMs ?? this.clock.now() + request.delayMs;
    return this.loop.execute({
      runId: request.id,
      input: request.input,
      maxAttempts: request.attempts,
      dueAtMs,
      limitMs: request.runTimeoutMs ?? this.timeoutMs,
    });
  }

  /**
   * The next fire times of the workflow's declared schedules after the fake clock's now, computed
   * as the worker plans them (cron-parser, the schedule's time zone or UTC, `H` seeded by its id).
   */
  schedules(count = 5): HarnessScheduleFires[] {
    return this.declaredSchedules.list(count);
  }

  /** The next `count` fire times of one declared schedule (default: the only one) after the fake clock's now. */
  nextFireTimes(scheduleId?: string, count = 5): Date[] {
    return this.declaredSchedules.nextFireTimes(scheduleId, count);
  }

  /**
   * Fires a declared schedule's next occurrence after the fake clock's now: moves the clock to it
   * and runs the workflow with the schedule's input, under the run id the worker would give it
   * (`<schedule id>@<occurrence ms>`).
   */
  async fireSchedule(scheduleId?: string): Promise<HarnessRun<Out>> {
    const fire = this.declaredSchedules.nextFire(scheduleId);
    this.clock.set(fire.at);
    return this.loop.execute({
      runId: fire.runId,
      input: fire.input,
      maxAttempts: this.attempts,
      dueAtMs: fire.at,
      limitMs: this.timeoutMs,
    });
  }

  /** Closes the Nest application context `SluiceTesting.create` made (a no-op otherwise). */
  async close(): Promise<void> {
    await this.onClose?.();
  }
}
