import { Logger } from '@nestjs/common';
import { InvalidInputError, LeaseLostError, NonRetryableError, RedisConnectionError, type RunErrorInfo } from '../errors';
import type { WorkflowRegistry } from '../discovery/workflow.registry';
import type { ResolvedQueueOptions } from '../queue.options';
import type { LuaScripts } from '../redis/lua.scripts';
import { decodePayload, encodePayload } from '../redis/payload.codec';
import type { RedisKeys } from '../redis/redis.keys';
import { runScope } from '../workflow/run.scope';
import type { RunContext } from '../workflow/workflow.types';
import { backoffDelay } from './backoff';
import type { LazyAbort } from './active-runs';
import type { Claim } from './claim';
import { commitPolicy, type RunCommits } from './run.commits';
import type { RunEvents } from './run.events';
import { StepRecorder } from './step.recorder';

const MAX_ERROR_TEXT = 8 * 1024;
const MAX_ERROR_NAME = 200;

/**
 * Executes one claimed run: the workflow's `run` inside the run scope (so `@Step` methods
 * memoize), then one token-checked complete or fail call. A worker that lost the lease writes
 * nothing; the run's new owner decides its fate.
 */
export class RunExecutor {
  private readonly logger = new Logger('Sluice');

  constructor(
    private readonly scripts: LuaScripts,
    private readonly keys: RedisKeys,
    private readonly registry: WorkflowRegistry,
    private readonly options: ResolvedQueueOptions,
    private readonly events: RunEvents,
    private readonly commits: RunCommits,
  ) {}

  /** Runs the claim to a committed outcome (or to the discovery that its lease is gone). */
  async execute(claim: Claim, abort: LazyAbort): Promise<void> {
    const definition = this.registry.get(claim.workflow);
    const persist = (key: string, encoded: string) => this.commits.saveStep(claim, key, encoded);
    const recorder = new StepRecorder(claim.id, claim.steps, persist, this.options.maxPayloadBytes, this.options.maxRunMemoBytes);
    const ctx: RunContext = {
      runId: claim.id,
      attempt: claim.attempt,
      get signal() {
        return abort.signal;
      },
      step: (name, fn) => recorder.step(name, fn),
    };
    const startedAt = Date.now();
    let encoded: string;
    try {
      const input = decodePayload(claim.input);
      const result = await runScope.run(recorder, () => definition.instance.run(input, ctx));
      encoded = encodePayload(result, `result of workflow "${claim.workflow}"`, this.options.maxPayloadBytes);
    } catch (error) {
      return this.fail(claim, error, abort, definition.backoff, startedAt);
    }
    if (await this.commits.complete(claim, encoded)) {
      this.events.emit('completed', this.outcome(claim, startedAt));
    } else {
      this.logger.warn(`Run ${claim.id} (${claim.workflow}) finished after its lease was lost; its result was discarded`);
    }
  }

  private async fail(claim: Claim, error: unknown, abort: LazyAbort, backoff: Parameters<typeof backoffDelay>[0], startedAt: number): Promise<void> {
    const runKeys = [this.keys.run(claim.id), this.keys.leases, this.keys.limits, this.keys.seq];
    if (error instanceof RedisConnectionError) {
      // A step's result could not be saved because Redis was away: not the run's fault. Hand it
      // back without counting a failure (if Redis is still away, the lease lapses instead).
      this.logger.warn(`Run ${claim.id} (${claim.workflow}): ${error.message}; handing it back`);
      await this.scripts.run('release', runKeys, [this.keys.base, claim.id, claim.token], commitPolicy(this.options));
      return;
    }
    const retryable = !(error instanceof NonRetryableError || error instanceof InvalidInputError);
    const described = describeError(error);
    // Always asked of the token-checked script, even after a lost lease: the token decides.
    const outcome = await this.scripts.run<string>('fail', runKeys, [
      this.keys.base, claim.id, claim.token, JSON.stringify(described), retryable ? 1 : 0,
      backoffDelay(backoff, claim.failures + 1), this.options.defaults.resultTtlMs,
    ], commitPolicy(this.options));
    if (outcome === 'lost') {
      if (error instanceof LeaseLostError || abort.reason instanceof LeaseLostError) {
        this.logger.warn(`Run ${claim.id} (${claim.workflow}) lost its lease; another worker carries it on`);
      }
      return;
    }
    const willRetry = outcome === 'retry';
    const message = `Run ${claim.id} (${claim.workflow}) attempt ${claim.attempt} failed: ${described.message}`;
    if (willRetry) this.logger.warn(`${message}; will retry`);
    else this.logger.error(`${message}; giving up`);
    this.events.emit('failed', { ...this.outcome(claim, startedAt), error: { name: described.name, message: described.message }, willRetry });
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
