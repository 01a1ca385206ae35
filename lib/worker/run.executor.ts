import { Logger } from '@nestjs/common';
import { LeaseLostError, SluiceError, type RunErrorInfo, RunCancelledError, WorkerShutdownError } from '../errors';
import type { WorkflowRegistry } from '../discovery/workflow.registry';
import type { ResolvedQueueOptions } from '../queue.options';
import type { LuaScripts } from '../redis/lua.scripts';
import { decodePayload, encodePayload } from '../redis/payload.codec';
import type { RedisKeys } from '../redis/redis.keys';
import { inRunScope } from '../workflow/run.scope';
import type { RunContext } from '../workflow/workflow.types';
import { attemptRetryable } from './attempt.retryable';
import { backoffDelay } from './backoff';
import type { LazyAbort } from './active-runs';
import type { Claim } from '../redis/commands/claim.reply';
import { commitPolicy } from '../redis/commands/commit.policy';
import type { RunCommits } from './run.commits';
import type { RunEvents } from './run.events';
import { StepRecorder } from './step.recorder';
import { AttemptGuard } from './attempt.guard';
import type { JournalOutcome } from './attempt.journal';
import { ProgressReporter } from './progress.reporter';
import { ThrottledLog } from '../util/throttled-log';
import type { AttemptTelemetry, RunTelemetry } from '../telemetry/run.telemetry';
import { RunWaits, waitMethods } from './run.waits';
import { RunContinuation } from './run.continuation';
import { RedisWaitPort } from './wait.port';
import { OwnCommitFailures } from './commit.failures';
import { handBackRun } from './hand-back';

/** What the race in an attempt settles with when the run suspended in a durable wait. */
const SUSPENDED = Symbol('suspended');
/** … and when it continued as new (`ctx.continueAsNew`). */
const CONTINUED = Symbol('continued');

const MAX_ERROR_TEXT = 8 * 1024;
const MAX_ERROR_NAME = 200;

/**
 * Executes one claimed run: the workflow's `run` inside the run scope (so `@Step` methods
 * memoize), then one token-checked complete or fail call. A worker that lost the lease writes
 * nothing; the run's new owner decides its fate.
 */
export class RunExecutor {
  private readonly logger = new Logger('Sluice');
  /**
   * Hand-backs and lost leases come in bursts — an outage hits every run in flight at about the
   * same time — so they share one line a minute, with a count of those held back.
   */
  private readonly runWarnings = new ThrottledLog(this.logger, 60_000);
  /** Progress writes that failed (Redis away): advisory, so one line a minute for all runs. */
  private readonly progressWarnings = new ThrottledLog(this.logger, 60_000);

  constructor(
    private readonly scripts: LuaScripts,
    private readonly keys: RedisKeys,
    private readonly registry: WorkflowRegistry,
    private readonly options: ResolvedQueueOptions,
    private readonly events: RunEvents,
    private readonly commits: RunCommits,
    /** Only with OpenTelemetry on (see lib/telemetry/run.telemetry.ts). */
    private readonly telemetry?: RunTelemetry,
  ) {}

  /** Runs the claim to a committed outcome (or to the discovery that its lease is gone). */
  execute(claim: Claim, abort: LazyAbort): Promise<void> {
    // Telemetry on: the same attempt, inside its span. Off: nothing more than the attempt.
    if (this.telemetry) return this.telemetry.attempt(claim, (telemetry) => this.executeAttempt(claim, abort, telemetry));
    return this.executeAttempt(claim, abort);
  }

  /** `telemetry` is told the attempt's outcome once it is committed (or known lost). */
  private async executeAttempt(claim: Claim, abort: LazyAbort, telemetry?: AttemptTelemetry): Promise<void> {
    const definition = this.registry.get(claim.workflow);
    // Only this attempt's own commits that found Redis away hand the run back (see OwnCommitFailures).
    const commitFailures = new OwnCommitFailures();
    const persist = (key: string, encoded: string) => commitFailures.watch(this.commits.saveStep(claim, key, encoded));
    // The attempt's time limits: the run's own, else the workflow's; step limits end it through the guard too.
    const guard = new AttemptGuard(claim.id, abort);
    // A cancelled run's attempt ends now, as a timed-out one does: the process's local slot frees
    // even if the code ignores its signal (its writes are refused by the token anyway). An attempt
    // whose lease was lost runs on until its code returns (a shutdown drains it): its next step
    // does not start, and whatever it writes meanwhile is refused.
    abort.onAbort = (reason) => reason instanceof RunCancelledError && guard.expire(reason);
    const limitMs = claim.timeoutMs ?? definition.timeoutMs;
    const recorder = new StepRecorder(claim.id, claim.steps, persist, this.options.maxPayloadBytes, this.options.maxRunMemoBytes, telemetry, guard);
    let progress: ProgressReporter | undefined;
    // A durable wait that suspends the run ends the attempt here (guard.settle resolves with
    // SUSPENDED): nothing more to commit. Built on the first wait: a run that never waits pays nothing.
    let port: RedisWaitPort | undefined;
    const portOf = () => (port ??= new RedisWaitPort(this.scripts, this.keys, this.registry, this.options, claim, commitFailures));
    let waits: RunWaits | undefined;
    const waitsOf = () => (waits ??= new RunWaits(claim.id, recorder, guard, portOf(), () => guard.release(SUSPENDED), claim.generation));
    const ctx: RunContext = {
      runId: claim.id,
      attempt: claim.attempt,
      get signal() {
        return abort.signal;
      },
      step: (name, fn, options) => recorder.step(name, fn, options),
      // Made on the first call only: a run that never reports progress gets no reporter.
      // After the attempt ended (code that ignored its signal), a report writes nothing.
      progress: (value) => (guard.ended ? Promise.resolve() : (progress ??= this.progressReporter(claim)).report(value)),
      ...waitMethods(waitsOf),
      continueAsNew: (input) => new RunContinuation(recorder, guard, portOf(), this.options.maxPayloadBytes, () => guard.release(CONTINUED)).continueAsNew(input),
    };
    const startedAt = Date.now();
    if (this.events.listens('active')) this.events.emit('active', { runId: claim.id, workflow: claim.workflow, attempt: claim.attempt });
    let encoded: string;
    try {
      const input = decodePayload(claim.input);
      // Past a time limit this rejects with the TimeoutError at once, leaving code that ignores
      // its signal running in the background: the attempt fails now, its slots are freed, and
      // the worker drops the run from its active runs when this returns (its later writes are
      // refused by the token).
      const result: unknown = await guard.settle<unknown>(inRunScope(recorder, () => definition.instance.run(input, ctx)), limitMs);
      if (result === SUSPENDED) return this.suspended(claim, guard, abort, progress, startedAt, telemetry);
      if (result === CONTINUED) return this.continued(claim, guard, abort, progress, telemetry);
      encoded = encodePayload(result, `result of workflow "${claim.workflow}"`, this.options.maxPayloadBytes);
    } catch (error) {
      guard.ended = true;
      progress?.end(); // before the outcome's call, so the last value lands first
      // Aborted at the shutdown deadline: the orchestrator hands the run back (lib/worker/worker.orchestrator.ts),
      // so whatever the code threw on its signal is not the run's failure — no fail call, no event.
      if (abort.reason instanceof WorkerShutdownError) return telemetry?.ended('released', error);
      if (commitFailures.has(error)) return this.handBack(claim, error, telemetry);
      return this.fail(claim, error, abort, definition.backoff, startedAt, this.journal(recorder, claim, 'failed', error), telemetry);
    }
    guard.ended = true;
    progress?.end();
    if (await this.commits.complete(claim, encoded, this.journal(recorder, claim, 'completed'))) {
      telemetry?.ended('completed');
      this.events.emit('completed', this.outcome(claim, startedAt));
    } else {
      telemetry?.ended('lost');
      // A cancelled run's result is discarded by design: nothing to warn about.
      if (!(abort.reason instanceof RunCancelledError)) this.runWarnings.warn(`Run ${claim.id} (${claim.workflow}) finished after its lease was lost; its result was discarded`);
    }
  }

  /** The run suspended in a durable wait (committed by the wait itself): the attempt ends without an outcome. */
  private suspended(claim: Claim, guard: AttemptGuard, abort: LazyAbort, progress: ProgressReporter | undefined, startedAt: number, telemetry?: AttemptTelemetry): void {
    guard.ended = true;
    // Code still running beside the wait (not awaited) learns that the attempt is over.
    abort.abort(new SluiceError(`Run ${claim.id} suspended in a durable wait; this attempt is over`));
    progress?.end();
    telemetry?.ended('suspended');
    this.events.emit('suspended', this.outcome(claim, startedAt));
  }

  /**
   * One of the attempt's own commits (a step save, a wait) could not reach Redis: not the run's
   * fault. Hand it back without counting a failure, delayed with a backoff that grows with each
   * such hand-back of the run (lib/worker/hand-back.ts), so a commit path that keeps failing does
   * not spin. If Redis is still away, the hand-back fails too and the lease lapses instead.
   */
  private async handBack(claim: Claim, error: unknown, telemetry?: AttemptTelemetry): Promise<void> {
    this.runWarnings.warn(`Run ${claim.id} (${claim.workflow}): ${(error as Error).message}; handing it back, with a backoff`);
    await handBackRun(this.scripts, this.keys, claim, commitPolicy(this.options), true);
    telemetry?.ended('released', error);
  }

  /** The run continued as new (committed by `ctx.continueAsNew` itself): this execution is over, the run is due again with its new input. */
  private continued(claim: Claim, guard: AttemptGuard, abort: LazyAbort, progress: ProgressReporter | undefined, telemetry?: AttemptTelemetry): void {
    guard.ended = true;
    abort.abort(new SluiceError(`Run ${claim.id} continued as new; this attempt is over`));
    progress?.end();
    telemetry?.ended('continued');
  }

  private async fail(claim: Claim, error: unknown, abort: LazyAbort, backoff: Parameters<typeof backoffDelay>[0], startedAt: number, journal: string, telemetry?: AttemptTelemetry): Promise<void> {
    const runKeys = [this.keys.run(claim.id), this.keys.leases, this.keys.limits, this.keys.seq];
    const retryable = attemptRetryable(error);
    const described = describeError(error);
    const delayMs = backoffDelay(backoff, claim.failures + 1);
    // Always asked of the token-checked script, even after a lost lease: the token decides.
    const outcome = await this.scripts.run<string>('fail', runKeys, [
      this.keys.base, claim.id, claim.token, JSON.stringify(described), retryable ? 1 : 0,
      delayMs, this.options.defaults.resultTtlMs, journal,
    ], commitPolicy(this.options));
    // 'suspended': a wait beside the failure closed the attempt first (see RunWaits); the run
    // waits, and the failed step runs again when it resumes. 'continued': the attempt's
    // continueAsNew landed although its reply was lost. Like a lost lease, nothing to report.
    // 'released': the run was handed back with this token first (the shutdown deadline): it is
    // waiting and runs again, so no failure happened — reporting one would say it failed for good.
    if (outcome === 'released') return telemetry?.ended('released', error);
    if (outcome === 'lost' || outcome === 'suspended' || outcome === 'continued') {
      telemetry?.ended('lost', error);
      if (!(abort.reason instanceof RunCancelledError) && (error instanceof LeaseLostError || abort.reason instanceof LeaseLostError)) {
        this.runWarnings.warn(`Run ${claim.id} (${claim.workflow}) lost its lease; another worker carries it on`);
      }
      return;
    }
    const willRetry = outcome === 'retry';
    const message = `Run ${claim.id} (${claim.workflow}) attempt ${claim.attempt} failed: ${described.name}: ${described.message}`;
    // A retried attempt is routine for flaky dependencies: its level is the user's (logging.attemptFailed).
    const attemptLevel = this.options.logging.attemptFailed;
    if (!willRetry) this.logger.warn(`${message}; failed for good (${retryable ? 'no attempts left' : 'not retryable'})`);
    else if (attemptLevel) this.logger[attemptLevel](`${message}; retrying in ${delayMs} ms`);
    telemetry?.ended(willRetry ? 'retry' : 'failed', error);
    const failed = { ...this.outcome(claim, startedAt), error: { name: described.name, message: described.message }, willRetry };
    this.events.emit('failed', failed);
    if (willRetry) this.events.emit('retrying', { ...failed, willRetry: true, delayMs });
  }

  /** The attempt's journal as its committing script stores it (a failed one with its error), or '' with `worker.timeline: false`. */
  private journal(recorder: StepRecorder, claim: Claim, outcome: JournalOutcome, error?: unknown): string {
    return this.options.worker.timeline ? recorder.journal.encode(claim.attempt, outcome, outcome === 'failed' ? describeError(error) : undefined) : '';
  }

  private progressReporter(claim: Claim): ProgressReporter {
    return ProgressReporter.forClaim(this.scripts, this.keys, this.options, claim, (error) =>
      this.progressWarnings.warn(`Run ${claim.id} (${claim.workflow}): a progress value was not stored: ${error instanceof Error ? error.message : String(error)}`),
    );
  }

  private outcome(claim: Claim, startedAt: number) {
    return { runId: claim.id, workflow: claim.workflow, attempt: claim.attempt, durationMs: Date.now() - startedAt };
  }
}

function describeError(error: unknown): RunErrorInfo {
  if (error instanceof Error) {
    return { name: clip(String(error.name), MAX_ERROR_NAME), message: clip(String(error.message)), ...(error.stack && { stack: clip(String(error.stack)) }) };
  }
  return { name: 'Error', message: clip(typeof error === 'string' ? error : safeString(error)) };
}

function safeString(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function clip(text: string, max = MAX_ERROR_TEXT): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
