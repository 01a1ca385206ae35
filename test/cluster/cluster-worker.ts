import { join } from 'node:path';
import { ChildWorker } from '../chaos/child-worker';
import type { ClusterSeed } from '../support/redis-cluster';

export interface ClusterWorkerOptions {
  seeds: ClusterSeed[];
  namespace: string;
  /** The plain redis-server the side effects are counted on. */
  effectUrl: string;
  concurrency?: number;
  lockMs?: number;
  stalledIntervalMs?: number;
  stepMs?: number;
  redisTimeoutMs?: number;
}

/** One forked worker process (cluster-worker.process.ts) on a Redis Cluster: a ChildWorker with its own script. */
export class ClusterWorker extends ChildWorker {
  constructor(options: ClusterWorkerOptions) {
    super(
      {
        SEEDS: JSON.stringify(options.seeds),
        NS: options.namespace,
        EFFECT_URL: options.effectUrl,
        CONCURRENCY: String(options.concurrency ?? 20),
        STEP_MS: String(options.stepMs ?? 0),
        ...(options.lockMs !== undefined && { LOCK_MS: String(options.lockMs) }),
        ...(options.stalledIntervalMs !== undefined && { STALLED_INTERVAL_MS: String(options.stalledIntervalMs) }),
        ...(options.redisTimeoutMs !== undefined && { REDIS_TIMEOUT_MS: String(options.redisTimeoutMs) }),
      },
      join(__dirname, 'cluster-worker.process.ts'),
    );
  }

  ready(timeoutMs = 30_000): Promise<unknown> {
    return this.waitFor((m) => m.ready === true, 'ready', timeoutMs);
  }
}
