import type { WorkflowRegistry } from '../discovery/workflow.registry';
import type { AttemptPorts } from '../execution/attempt.ports';
import { OwnCommitFailures } from '../execution/commit.failures';
import type { StepObserver } from '../execution/step.observer';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import type { Claim } from '../redis/commands/claim.reply';
import { ProgressReporter } from './progress.reporter';
import type { RunCommits } from './run.commits';
import { RedisWaitPort } from './wait.redis-port';

/** What every attempt's ports share: the worker's Redis side. */
export interface RedisAttemptDeps {
  scripts: LuaScripts;
  keys: RedisKeys;
  registry: WorkflowRegistry;
  options: ResolvedQueueOptions;
  commits: RunCommits;
  /** A progress write that failed (Redis away): advisory, so only logged. */
  onProgressError(claim: Claim, error: unknown): void;
}

/**
 * One claimed attempt's ports on Redis: step saves, waits and `continueAsNew` as token-checked
 * script calls (their connection failures noted as the attempt's own, see OwnCommitFailures),
 * progress through a throttled reporter. The wait port and the reporter are made on first use:
 * a run that never waits nor reports progress pays for neither.
 */
export class RedisAttemptPorts implements AttemptPorts {
  private failures?: OwnCommitFailures;
  private port?: RedisWaitPort;
  private reporter?: ProgressReporter;

  constructor(
    private readonly deps: RedisAttemptDeps,
    private readonly claim: Claim,
    /** The attempt's telemetry, only with it on. */
    readonly observer?: StepObserver,
  ) {}

  /** Only this attempt's own commits that found Redis away hand the run back. Made on first use: most attempts commit nothing of their own. */
  get commitFailures(): OwnCommitFailures {
    return (this.failures ??= new OwnCommitFailures());
  }

  saveStep(key: string, encoded: string): Promise<boolean> {
    // The batch's failure is noted as this attempt's own by the commit path (no promise more per step).
    return this.deps.commits.saveStep(this.claim, key, encoded, this.commitFailures);
  }

  commits(): RedisWaitPort {
    const { deps } = this;
    return (this.port ??= new RedisWaitPort(deps.scripts, deps.keys, deps.registry, deps.options, this.claim, this.commitFailures));
  }

  progress(value: unknown): Promise<void> {
    const { deps, claim } = this;
    return (this.reporter ??= ProgressReporter.forClaim(deps.scripts, deps.keys, deps.options, claim, (error) =>
      deps.onProgressError(claim, error),
    )).report(value);
  }

  ended(): void {
    this.reporter?.end();
  }
}
