import { Logger } from '@nestjs/common';
import { LeaseLostError, LeaseUnconfirmedError, RunCancelledError } from '../errors';
import type { WorkflowRegistry } from '../discovery/workflow.registry';
import type { AttemptJournal, JournalOutcome } from '../execution/attempt.journal';
import { AttemptRunner, type AttemptOutcome } from '../execution/attempt.runner';
import { describeError } from '../execution/error.info';
import type { LazyAbort } from '../execution/lazy.abort';
import { backoffDelay } from '../execution/retry.policy';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import type { AttemptTelemetry, RunTelemetry } from '../telemetry/run.telemetry';
import { ThrottledLog } from '../util/throttled-log';
import { RedisAttemptPorts, type RedisAttemptDeps } from './attempt.redis-ports';
import type { Claim } from '../redis/commands/claim.reply';
import { handBackRun } from './hand-back';
import { BatchAttempt } from './batch.attempt';
import { commitPolicy } from '../redis/commands/commit.policy';
import { fail } from '../redis/commands/fail.command';
import type { RunCommits } from './run.commits';
import type { RunEvents } from './run.events';

type FailedAttempt = Extract<AttemptOutcome, { kind: 'failed' }>;

/**
 * Executes one claimed run: its attempt through the shared {@link AttemptRunner}, with ports
 * that commit on Redis, then the outcome's one token-checked call (complete, fail, or a
 * hand-back). A worker that lost the lease writes nothing; the run's new owner decides its fate.
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
  private readonly runner: AttemptRunner;
  private readonly ports: RedisAttemptDeps;

  constructor(
    private readonly scripts: LuaScripts,
    private readonly keys: RedisKeys,
    private readonly registry: WorkflowRegistry,
    private readonly options: ResolvedQueueOptions,
    private readonly events: RunEvents,
    private readonly commits: RunCommits,
    /** Only with OpenTelemetry on (see lib/telemetry/run.telemetry.ts). */
    private readonly telemetry?: RunTelemetry,
  ) {
    this.runner = new AttemptRunner(options);
    this.ports = {
      scripts,
      keys,
      registry,
      options,
      commits,
      onProgressError: (claim, error) =>
        this.progressWarnings.warn(
          `Run ${claim.id} (${claim.workflow}): a progress value was not stored: ${error instanceof Error ? error.message : String(error)}`,
        ),
    };
  }

  /**
   * Runs the claim to a committed outcome (or to the discovery that its lease is gone).
   * `codeDone` is called once the attempt's code has finished, before its outcome is committed.
   */
  execute(claim: Claim, abort: LazyAbort, codeDone?: () => void): Promise<void> {
    // Telemetry recording: the same attempt, inside its span. Off (or no SDK registered): nothing more than the attempt.
    const { telemetry } = this;
    if (telemetry?.recording()) return telemetry.attempt(claim, (attempt) => this.executeAttempt(claim, abort, codeDone, attempt));
    return this.executeAttempt(claim, abort, codeDone);
  }

  /** `telemetry` is told the attempt's outcome once it is committed (or known lost). */
  private async executeAttempt(claim: Claim, abort: LazyAbort, codeDone?: () => void, telemetry?: AttemptTelemetry): Promise<void> {
    const definition = this.registry.get(claim.workflow);
    // A batch run's attempt (docs/batches.md): its members first; a plain run pays one check.
    let batch: BatchAttempt | undefined;
    if (definition.batch) {
      try {
        batch = await BatchAttempt.load(this.ports, claim, definition);
      } catch (error) {
        return await this.handBack(claim, error, telemetry);
      }
    }
    const startedAt = Date.now();
    if (this.events.listens('active')) this.events.emit('active', { runId: claim.id, workflow: claim.workflow, attempt: claim.attempt });
    // The attempt's time limits: the run's own, else the workflow's.
    const outcome = await this.runner.run(
      batch ? batch.instance : definition.entry,
      claim,
      claim.timeoutMs ?? definition.timeoutMs,
      abort,
      new RedisAttemptPorts(this.ports, claim, telemetry),
      definition, // its schemas, if any
    );
    codeDone?.();
    // Each branch awaits rather than returns its promise: an async function that returns a
    // promise settles two microtask turns later, through a promise more (this runs per run).
    // The common outcome is committed here rather than in a method of its own, for the same reason.
    switch (outcome.kind) {
      case 'completed':
        if (
          await (batch
            ? batch.complete(outcome.result, this.journal(outcome.journal, claim, 'completed'))
            : this.commits.complete(claim, outcome.result, this.journal(outcome.journal, claim, 'completed')))
        ) {
          telemetry?.ended('completed');
          if (this.events.listens('completed')) this.events.emit('completed', this.outcome(claim, startedAt));
        } else this.lost(claim, abort, telemetry);
        return;
      case 'failed':
        // Stopped because its lease went unrenewed (Redis unreachable), not by its own fault.
        if (abort.reason instanceof LeaseUnconfirmedError) return await this.handBack(claim, abort.reason, telemetry);
        return await this.fail(claim, outcome, abort, definition.backoff, startedAt, telemetry, batch);
      case 'handed-back':
        return await this.handBack(claim, outcome.error, telemetry);
      case 'released':
        // Aborted at the shutdown deadline: the orchestrator hands the run back, so whatever the
        // code threw on its signal is not the run's failure — no fail call, no event.
        return telemetry?.ended('released', outcome.error);
      case 'suspended':
        telemetry?.ended('suspended');
        return this.events.emit('suspended', this.outcome(claim, startedAt));
      case 'continued':
        return telemetry?.ended('continued');
    }
  }

  /** A result whose complete call found the lease gone: nothing was written. */
  private lost(claim: Claim, abort: LazyAbort, telemetry?: AttemptTelemetry): void {
    telemetry?.ended('lost');
    // A cancelled run's result is discarded by design: nothing to warn about.
    if (!(abort.reason instanceof RunCancelledError))
      this.runWarnings.warn(`Run ${claim.id} (${claim.workflow}) finished after its lease was lost; its result was discarded`);
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

  private async fail(
    claim: Claim,
    { error, retryable, journal }: FailedAttempt,
    abort: LazyAbort,
    backoff: Parameters<typeof backoffDelay>[0],
    startedAt: number,
    telemetry?: AttemptTelemetry,
    batch?: BatchAttempt,
  ): Promise<void> {
    const described = describeError(error);
    const delayMs = backoffDelay(backoff, claim.failures + 1);
    const request = { error: JSON.stringify(described), retryable, delayMs, journal: this.journal(journal, claim, 'failed', error) };
    // Always asked of the token-checked script, even after a lost lease: the token decides.
    const outcome = batch
      ? await batch.fail(request)
      : await fail(
          this.scripts,
          this.keys,
          { claim, ...request, retentionMs: this.options.defaults.resultTtlMs },
          commitPolicy(this.options),
        );
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
  private journal(journal: AttemptJournal, claim: Claim, outcome: JournalOutcome, error?: unknown): string {
    return this.options.worker.timeline
      ? journal.encode(claim.attempt, outcome, outcome === 'failed' ? describeError(error) : undefined)
      : '';
  }

  private outcome(claim: Claim, startedAt: number) {
    return { runId: claim.id, workflow: claim.workflow, attempt: claim.attempt, durationMs: Date.now() - startedAt };
  }
}
