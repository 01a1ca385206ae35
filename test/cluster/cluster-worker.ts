import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import type { ClusterSeed } from '../support/redis-cluster';

export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

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

/**
 * One forked worker process (cluster-worker.process.ts through ts-node) on a Redis Cluster.
 * Every wait is an IPC message or the exit, with a deadline; never a sleep.
 */
export class ClusterWorker {
  readonly proc: ChildProcess;
  readonly exited: Promise<WorkerExit>;
  private readonly messages: Array<Record<string, unknown>> = [];
  private readonly listeners = new Set<() => void>();
  private exit?: WorkerExit;

  constructor(options: ClusterWorkerOptions) {
    const env: Record<string, string> = {
      SEEDS: JSON.stringify(options.seeds),
      NS: options.namespace,
      EFFECT_URL: options.effectUrl,
      CONCURRENCY: String(options.concurrency ?? 20),
      STEP_MS: String(options.stepMs ?? 0),
      ...(options.lockMs !== undefined && { LOCK_MS: String(options.lockMs) }),
      ...(options.stalledIntervalMs !== undefined && { STALLED_INTERVAL_MS: String(options.stalledIntervalMs) }),
      ...(options.redisTimeoutMs !== undefined && { REDIS_TIMEOUT_MS: String(options.redisTimeoutMs) }),
    };
    this.proc = fork(join(__dirname, 'cluster-worker.process.ts'), [], {
      execArgv: ['-r', 'ts-node/register/transpile-only'],
      env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true', ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.proc.on('message', (message) => {
      this.messages.push(message as Record<string, unknown>);
      this.listeners.forEach((notify) => notify());
    });
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        this.exit = { code, signal };
        this.listeners.forEach((notify) => notify());
        resolve(this.exit);
      });
    });
  }

  get pid(): number {
    return this.proc.pid!;
  }

  /** The first message matching `match`; rejects if the child exits first or on the deadline. */
  waitFor(match: (message: Record<string, unknown>) => boolean, what: string, timeoutMs = 30_000): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => settle(() => reject(new Error(`cluster worker ${this.pid}: no ${what} within ${timeoutMs} ms`))), timeoutMs);
      const settle = (fn: () => void) => {
        clearTimeout(timer);
        this.listeners.delete(check);
        fn();
      };
      const check = () => {
        const found = this.messages.find(match);
        if (found) return settle(() => resolve(found));
        if (this.exit) settle(() => reject(new Error(`cluster worker ${this.pid} exited (${JSON.stringify(this.exit)}) before ${what}`)));
      };
      this.listeners.add(check);
      check();
    });
  }

  ready(timeoutMs = 30_000): Promise<unknown> {
    return this.waitFor((m) => m.ready === true, 'ready', timeoutMs);
  }

  /** Asks the child to close its app; resolves with its exit. */
  async stop(timeoutMs = 20_000): Promise<WorkerExit> {
    this.proc.send('stop');
    await this.waitFor((m) => m.stopped === true, 'stop report', timeoutMs);
    return Promise.race([
      this.exited,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`cluster worker ${this.pid} did not exit after stopping`)), timeoutMs).unref()),
    ]);
  }

  /** Cleanup after a failed test: kills this child (by its pid) if it still runs. */
  async kill(): Promise<WorkerExit> {
    if (!this.exit) this.proc.kill('SIGKILL');
    return this.exited;
  }
}
