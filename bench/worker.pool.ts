import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import type { FromWorker, ToWorker } from './cluster.worker';
import { isStopping } from './teardown';

/** One forked cluster.worker.ts: send it messages, await its next one of a type. */
export class WorkerProcess {
  private readonly inbox: FromWorker[] = [];
  private readonly waiters: Array<{ type: FromWorker['type']; resolve: (m: FromWorker) => void; reject: (e: Error) => void }> = [];
  private exited?: Error;
  private readonly exit: Promise<void>;

  constructor(private readonly child: ChildProcess) {
    child.on('message', (message: FromWorker) => {
      if (message.type === 'failed') return this.fail(new Error(`bench worker ${child.pid} failed: ${message.error}`));
      const waiter = this.waiters.findIndex((w) => w.type === message.type);
      if (waiter >= 0) this.waiters.splice(waiter, 1)[0].resolve(message);
      else this.inbox.push(message);
    });
    this.exit = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.fail(new Error(`bench worker ${child.pid} exited (${signal ?? code})`));
        resolve();
      }),
    );
  }

  send(message: ToWorker): void {
    if (this.exited) throw this.exited;
    this.child.send(message);
  }

  /** The next message of `type`; rejects if the worker fails or exits first. */
  next<T extends FromWorker['type']>(type: T): Promise<Extract<FromWorker, { type: T }>> {
    const queued = this.inbox.findIndex((m) => m.type === type);
    if (queued >= 0) return Promise.resolve(this.inbox.splice(queued, 1)[0] as Extract<FromWorker, { type: T }>);
    if (this.exited) return Promise.reject(this.exited);
    return new Promise((resolve, reject) => this.waiters.push({ type, resolve: resolve as (m: FromWorker) => void, reject }));
  }

  /** SIGKILL (no graceful shutdown needed: each run starts from a FLUSHALL) and wait for the exit. */
  async kill(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exit;
  }

  private fail(error: Error): void {
    this.exited ??= error;
    this.waiters.splice(0).forEach((w) => w.reject(error));
  }
}

/**
 * Worker processes forked once and reused across runs (ts-node compiles the library in each one:
 * seconds of start-up that should not be paid per run). After a failed run the pool is killed and
 * forks fresh workers on the next `take`.
 */
export class WorkerPool {
  private workers: WorkerProcess[] = [];

  /** The first `count` workers, forking the missing ones. */
  async take(count: number): Promise<WorkerProcess[]> {
    if (isStopping()) throw new Error('the benchmark is stopping');
    while (this.workers.length < count) {
      const child = fork(join(__dirname, 'cluster.worker.ts'), [], {
        execArgv: ['-r', 'ts-node/register/transpile-only'],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      this.workers.push(new WorkerProcess(child));
    }
    return this.workers.slice(0, count);
  }

  async kill(): Promise<void> {
    const workers = this.workers.splice(0);
    await Promise.all(workers.map((w) => w.kill()));
  }
}
