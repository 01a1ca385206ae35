import { Inject, Injectable } from '@nestjs/common';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { RedisConnections } from '../redis/redis.connections';
import { MAX_RECONNECT_DELAY_MS } from '../redis/redis.factory';
import { BLOCK_GRACE_MS, MAX_BLOCK_MS } from '../worker/wake.listener';
import { WorkerOrchestrator, WorkerState } from '../worker/worker.orchestrator';

/** What {@link QueueHealth.check} reports. */
export interface QueueHealthReport {
  /** Redis answered and the worker (if this process runs one) is running and not wedged. */
  healthy: boolean;
  /** The command connection's bounded `PING`. */
  redis: {
    /** Redis answered the `PING` in time. */
    up: boolean;
    /** Why it did not; absent when `up`. */
    error?: string;
  };
  /** This process's worker. */
  worker: {
    /** Where the worker is in its lifecycle; `disabled` in a producer-only process (`worker.enabled: false`). */
    state: WorkerState;
    /** When the reserve loop last came round; a loop stuck longer than its bound is unhealthy. */
    lastWakeAt?: Date;
    /** Why the worker is unhealthy (a wedged or failing loop, a blocking connection down), or why it waits for Redis; absent otherwise. */
    error?: string;
  };
}

/**
 * Liveness of this process's Sluice: whether Redis answers (a bounded `PING` on the command
 * connection), and whether the worker runs — a worker waiting for Redis since bootstrap, a
 * reserve loop that has not come round within its bound, or a worker whose blocking connection
 * has been down for longer than `redisTimeoutMs` + 2 s (it cannot be woken by new work) is
 * unhealthy even while `PING` works. For `@nestjs/terminus`, see `QueueHealthIndicator`.
 */
@Injectable()
export class QueueHealth {
  /** @internal Nest constructs it from Sluice's internal services: inject `QueueHealth` instead. */
  constructor(
    private readonly connections: RedisConnections,
    private readonly orchestrator: WorkerOrchestrator,
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
  ) {}

  /** Never rejects; settles within `timeoutMs` (default: `redisTimeoutMs`). */
  async check(timeoutMs = this.options.redisTimeoutMs): Promise<QueueHealthReport> {
    const redis = await this.connections.command
      .call('ping', (client) => client.ping(), { timeoutMs })
      .then(
        () => ({ up: true }),
        (error: Error) => ({ up: false, error: error.message }),
      );
    const { state, lastWakeAt, lastOkAt, lastLoopError, error } = this.orchestrator.state;
    // A loop comes round at least once per block (or stall interval), plus its calls' bounds.
    const boundMs = Math.max(MAX_BLOCK_MS, this.options.worker.stalledIntervalMs) + BLOCK_GRACE_MS + 2 * this.options.redisTimeoutMs;
    const wedged = state === 'running' && lastWakeAt !== undefined && Date.now() - lastWakeAt > boundMs;
    // A loop that comes round but fails every time (e.g. every reserve refused with READONLY after
    // a failover left this process on a replica) claims nothing: unhealthy past the same bound.
    const failingMs = state === 'running' && lastOkAt !== undefined && lastLoopError !== undefined ? Date.now() - lastOkAt : 0;
    const failing = failingMs > boundMs;
    // The loop still comes round when its blocking reads fail (each gives up within its bound),
    // so a blocking connection that cannot come back is looked at directly: a reconnect is tried
    // at least every 2 s, each bounded by redisTimeoutMs, so down for longer is not a blip.
    const cutOffBoundMs = this.options.redisTimeoutMs + MAX_RECONNECT_DELAY_MS;
    const blockingDownSince = state === 'running' ? this.connections.blocking.downSince : undefined;
    const cutOffMs = blockingDownSince === undefined ? 0 : Date.now() - blockingDownSince;
    const cutOff = cutOffMs > cutOffBoundMs;
    const workerOk = state === 'disabled' || (state === 'running' && !wedged && !failing && !cutOff);
    const workerError = wedged
      ? `reserve loop has not come round for over ${boundMs} ms`
      : failing
        ? `reserve loop failing for ${failingMs} ms (over ${boundMs} ms): ${lastLoopError}`
        : cutOff
          ? `blocking connection down for ${cutOffMs} ms (over ${cutOffBoundMs} ms; last: ${this.connections.blocking.downReason}): the worker cannot be woken by new work`
          : error;
    return {
      healthy: redis.up && workerOk,
      redis,
      worker: {
        state,
        ...(lastWakeAt !== undefined && { lastWakeAt: new Date(lastWakeAt) }),
        ...(workerError && { error: workerError }),
      },
    };
  }
}
