import { Logger } from '@nestjs/common';
import type { ResolvedQueueOptions } from '../queue.options';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisConnections } from '../redis/redis.connections';
import type { RedisKeys } from '../redis/redis.keys';
import type { ActiveRuns } from './active-runs';
import { Claim, parseClaimReply } from './claim';
import { Refill, RunCommits } from './run.commits';
import type { RunExecutor } from './run.executor';

/** Most runs one reserve call claims: Lua runs single-threaded, so one wake must never stall Redis. */
export const RESERVE_BATCH_CAP = 64;
/** Most delayed runs one reserve call promotes. */
const PROMOTE_CAP = 256;
/** Longest a worker blocks on Redis without re-reserving (so it notices clock-driven work). */
const MAX_BLOCK_MS = 5_000;
const ERROR_PAUSE_MS = 1_000;
const REDIS_TIMEOUT_RESOLUTION_MS = 100;

/**
 * The reserve loop of one process. Each wake is one reserve call claiming up to the free slots.
 * A saturated worker parks on an in-process signal (its own completions) and pays no round trip;
 * a worker with free slots blocks on its workflows' Redis wake lists until work arrives or the
 * next delayed run is due.
 */
export class WorkerLoop {
  private readonly logger = new Logger('Sluice');
  private stopping = false;
  private finished?: Promise<void>;
  private readonly executor: RunExecutor;
  private lastStallScan = 0;
  /** Slots promised to complete calls in flight that refill them (see {@link refill}). */
  private refilling = 0;
  private rotation = 0;

  constructor(
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScripts,
    private readonly keys: RedisKeys,
    private readonly options: ResolvedQueueOptions,
    private readonly workflows: string[],
    private readonly active: ActiveRuns,
    makeExecutor: (commits: RunCommits) => RunExecutor,
  ) {
    const refill = { take: (runs: number) => this.takeRefill(runs), settle: (claims: Claim[], promised: number) => this.settleRefill(claims, promised) };
    this.executor = makeExecutor(new RunCommits(scripts, keys, options, refill));
  }

  start(): void {
    this.finished = this.loop();
  }

  /** Stops reserving; in-flight runs carry on (the caller drains them). */
  async stop(): Promise<void> {
    this.stopping = true;
    this.active.interrupt();
    this.connections.dropBlocking();
    await this.finished;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        await this.tick();
      } catch (error) {
        if (this.stopping) break;
        this.logger.error(`Worker loop: ${(error as Error).message}; retrying in ${ERROR_PAUSE_MS} ms`);
        await this.active.whenOneFinishes(ERROR_PAUSE_MS);
      }
    }
  }

  private async tick(): Promise<void> {
    const free = this.options.worker.concurrency - this.active.size - this.refilling;
    if (free <= 0) {
      // Saturated: our own completion is the event that matters; wake at least once per stall
      // interval to take part in promotion and the stalled scan.
      await this.active.whenOneFinishes(this.options.worker.stalledIntervalMs);
      if (!this.stopping && this.active.size + this.refilling >= this.options.worker.concurrency) await this.reserve(0);
      return;
    }
    const wanted = Math.min(free, RESERVE_BATCH_CAP);
    const { claims, head: nextDueMs } = await this.reserve(wanted);
    for (const claim of claims) this.launch(claim);
    // A short batch means nothing more is claimable now: wait for Redis to say otherwise.
    if (claims.length < wanted && nextDueMs !== 0 && !this.stopping) await this.blockForWake(nextDueMs);
  }

  private async reserve(wanted: number): Promise<{ head: number; claims: Claim[] }> {
    const now = Date.now();
    const scan = now - this.lastStallScan >= this.options.worker.stalledIntervalMs;
    if (scan) this.lastStallScan = now;
    const reply = await this.scripts.run<unknown[]>('reserve', [this.keys.delayed, this.keys.leases, this.keys.limits, this.keys.seq, this.keys.stallGate], [
      this.keys.base, wanted, this.options.worker.lockMs, scan ? this.options.worker.stalledIntervalMs : 0,
      this.options.worker.maxStalls, PROMOTE_CAP, this.options.defaults.resultTtlMs, ...this.rotatedWorkflows(),
    ]);
    return parseClaimReply(reply);
  }

  /**
   * Finishing runs refill their own slots in their complete call, saving a reserve round trip.
   * The promised slots count as taken until {@link settleRefill} hands over what was claimed.
   */
  private takeRefill(runs: number): Refill {
    const count = this.stopping ? 0 : runs;
    this.refilling += count;
    return { count, workflows: this.rotatedWorkflows() };
  }

  private settleRefill(claims: Claim[], promised: number): void {
    claims.forEach((claim) => this.launch(claim));
    this.refilling -= promised;
  }

  /** Each call starts the round-robin at the next workflow, so none is always served first. */
  private rotatedWorkflows(): string[] {
    const start = this.rotation++ % this.workflows.length;
    return start === 0 ? this.workflows : [...this.workflows.slice(start), ...this.workflows.slice(0, start)];
  }

  private launch(claim: Claim): void {
    const abort = new AbortController();
    this.active.add({ id: claim.id, token: claim.token, abort });
    this.executor
      .execute(claim, abort.signal)
      .catch((error: Error) => this.logger.error(`Run ${claim.id} (${claim.workflow}): ${error.message}; its lease will expire and another attempt will follow`))
      .finally(() => this.active.delete(claim.id));
  }

  private async blockForWake(nextDueMs: number): Promise<void> {
    // Redis checks blocking timeouts about every 100 ms (hz 10): a delayed run due sooner than
    // that is better served by a local timer, at the cost of noticing new work that much later.
    if (nextDueMs > 0 && nextDueMs < REDIS_TIMEOUT_RESOLUTION_MS) return this.active.whenOneFinishes(nextDueMs);
    const timeoutMs = Math.min(nextDueMs > 0 ? nextDueMs : Infinity, this.options.worker.stalledIntervalMs, MAX_BLOCK_MS);
    try {
      await this.connections.blocking.blpop(...this.workflows.map((wf) => this.keys.wake(wf)), Math.max(timeoutMs, 1) / 1000);
    } catch (error) {
      if (!this.stopping) throw error;
    }
  }
}
