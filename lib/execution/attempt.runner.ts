import { RunCancelledError, SluiceError, WorkerShutdownError } from '../errors';
import { decodePayload, encodePayload } from '../redis/payload.codec';
import { inRunScope, type StepRunner } from '../workflow/run.scope';
import { validateInput, validateOutput, type WorkflowSchemas } from '../workflow/schema.validate';
import { isThenable } from '../util/thenable';
import type { RunContext, WorkflowInstance } from '../workflow/workflow.types';
import type { StandardSchemaV1 } from '../workflow/standard-schema';
import { AttemptGuard } from './attempt.guard';
import type { AttemptJournal } from './attempt.journal';
import type { AttemptPorts, AttemptSpec } from './attempt.ports';
import type { LazyAbort } from './lazy.abort';
import { attemptRetryable } from './retry.policy';
import { AttemptContext } from './attempt.context';
import { StepRecorder } from './step.recorder';

/** What the race in an attempt settles with when the run suspended in a durable wait. */
const SUSPENDED = Symbol('suspended');
/** … and when it continued as new (`ctx.continueAsNew`). */
const CONTINUED = Symbol('continued');

/**
 * How an attempt ended, for its adapter to commit. `suspended` and `continued` were committed by
 * the wait or `continueAsNew` itself. `failed`: `retryable` says whether the failure earns another
 * attempt, attempts left permitting (see lib/execution/retry.policy.ts). `handed-back`: one of the
 * attempt's own commits could not reach Redis — not the run's fault, no failure counted.
 * `released`: aborted at a worker's shutdown deadline, which hands the run back itself.
 */
export type AttemptOutcome = { journal: AttemptJournal } & (
  | { kind: 'completed'; result: string }
  | { kind: 'failed'; error: unknown; retryable: boolean }
  | { kind: 'handed-back' | 'released'; error: unknown }
  | { kind: 'suspended' | 'continued' }
);

/** The bounds an attempt's payloads and memo keep (the module's options). */
export interface AttemptLimits {
  maxPayloadBytes: number;
  maxRunMemoBytes: number;
}

/**
 * Runs one attempt of a run, with no Redis of its own: the workflow's `run` inside the run scope
 * (so `@Step` methods memoize), steps through the {@link StepRecorder} (memo, replay, determinism
 * guard), waits and `continueAsNew` through the port, bounded by the attempt's time limit — and
 * decides how it ended ({@link AttemptOutcome}). The worker (lib/worker/run.executor.ts) and the
 * testing harness (lib/testing/workflow.harness.ts) both run attempts through it, with their ports.
 */
export class AttemptRunner {
  constructor(private readonly limits: AttemptLimits) {}

  /**
   * @param schemas the workflow's (its definition): the decoded input is validated before `run`,
   *   which gets the schema's output, and `run`'s result before it is encoded. A refusal fails the
   *   run without retries (InputValidationError, OutputValidationError). Without schemas nothing
   *   more is done; a synchronous schema adds no await.
   */
  async run(
    instance: WorkflowInstance,
    claim: AttemptSpec,
    limitMs: number | undefined,
    abort: LazyAbort,
    ports: AttemptPorts,
    schemas?: WorkflowSchemas,
  ): Promise<AttemptOutcome> {
    const guard = new AttemptGuard(claim.id, abort, ports.sleep, ports.random);
    // A cancelled run's attempt ends now, as a timed-out one does: the process's local slot frees
    // even if the code ignores its signal (its writes are refused by the token anyway). An attempt
    // whose lease was lost runs on until its code returns (a shutdown drains it): its next step
    // does not start, and whatever it writes meanwhile is refused.
    abort.onAbort = (reason) => reason instanceof RunCancelledError && guard.expire(reason);
    const { maxPayloadBytes } = this.limits;
    const recorder = new StepRecorder(
      claim.id,
      claim.steps,
      (key, encoded) => ports.saveStep(key, encoded),
      maxPayloadBytes,
      this.limits.maxRunMemoBytes,
      ports.observer,
      guard,
    );
    const steps = ports.steps ? ports.steps(recorder) : recorder;
    // A wait that suspends the run, or continueAsNew, ends the attempt here (guard.settle resolves
    // with SUSPENDED or CONTINUED).
    const ends = { suspended: () => guard.release(SUSPENDED), continued: () => guard.release(CONTINUED) };
    const ctx = new AttemptContext(claim, abort, steps, recorder, guard, ports, maxPayloadBytes, ends, schemas?.input);
    const { journal } = recorder;
    let result: unknown;
    try {
      const body = startRun(instance, decodePayload(claim.input), steps, ctx, schemas?.input, claim.workflow);
      // Past a time limit this rejects with the TimeoutError at once, leaving code that ignores
      // its signal running in the background: the attempt fails now, its slots are freed, and
      // its later writes are refused (by the token, in a worker). A `run` that returned a value
      // (not async) has nothing to race: it is taken as is, unless the attempt ended meanwhile.
      result = isThenable(body) || guard.over ? await guard.settle<unknown>(body, limitMs) : body;
      if (result !== SUSPENDED && result !== CONTINUED) {
        if (schemas?.output !== undefined) {
          // A synchronous schema adds no await.
          const checked = validateOutput(schemas.output, result, claim.workflow);
          result = (isThenable(checked) ? await checked : checked).value;
        }
        result = encodePayload(result, `result of workflow "${claim.workflow}"`, maxPayloadBytes);
      }
    } catch (error) {
      end(guard, ports);
      // Aborted at the shutdown deadline: the worker hands the run back (lib/worker/worker.orchestrator.ts),
      // so whatever the code threw on its signal is not the run's failure.
      if (abort.reason instanceof WorkerShutdownError) return { kind: 'released', error, journal };
      if (ports.commitFailures?.has(error)) return { kind: 'handed-back', error, journal };
      return { kind: 'failed', error, retryable: attemptRetryable(error), journal };
    }
    if (result === SUSPENDED || result === CONTINUED) {
      guard.ended = true;
      // Code still running beside the wait (not awaited) learns that the attempt is over.
      abort.abort(
        new SluiceError(
          result === SUSPENDED
            ? `Run ${claim.id} suspended in a durable wait; this attempt is over`
            : `Run ${claim.id} continued as new; this attempt is over`,
        ),
      );
      ports.ended();
      return { kind: result === SUSPENDED ? 'suspended' : 'continued', journal };
    }
    end(guard, ports);
    return { kind: 'completed', result: result as string, journal };
  }
}

/**
 * Calls `run` in the run's scope, with the input validated first where the workflow has an input
 * schema (validated again here: the producer may not know the schema, or know an older one). An
 * async schema's wait is part of the attempt, bounded by its time limit like `run`. Out of
 * `AttemptRunner.run`, so that an attempt without schemas creates no closure and keeps no more
 * state across its awaits than before schemas existed.
 */
function startRun(
  instance: WorkflowInstance,
  input: unknown,
  steps: StepRunner,
  ctx: RunContext,
  schema: StandardSchemaV1 | undefined,
  workflow: string,
): unknown {
  if (schema === undefined) return inRunScope(steps, callRun, instance, input, ctx);
  const checked = validateInput(schema, input, workflow);
  return isThenable(checked)
    ? checked.then((valid) => inRunScope(steps, callRun, instance, valid.value, ctx))
    : inRunScope(steps, callRun, instance, checked.value, ctx);
}

/** The workflow's `run`, called with its instance as `this` (a function, so the run scope needs no closure per attempt). */
function callRun(instance: WorkflowInstance, input: unknown, ctx: RunContext): unknown {
  return instance.run(input, ctx);
}

/** The attempt's outcome is decided: late calls of abandoned code write nothing, the last progress value lands first. */
function end(guard: AttemptGuard, ports: AttemptPorts): void {
  guard.ended = true;
  ports.ended();
}
