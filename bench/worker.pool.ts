import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import type { FromWorker, ToWorker } from './cluster.worker';
import { isStopping } from './teardown';

/** Every bench child process reports a failure this way (it exits after sending it). */
export type Failed = { type: 'failed'; error: string };

/** Forks a bench child module (compiled by ts-node in the child) with an IPC channel. */
export function forkBenchChild(file: string): ChildProcess {
  return fork(join(__dirname, file), [], {
    execArgv: ['-r', 'ts-node/register/transpile-only'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

/** One forked bench child (cluster.worker.ts, system.process.ts): send it messages, await its next one of a type. */
export class WorkerProcess<In = ToWorker, Out extends { type: string } = FromWorker> {
  private readonly inbox: Out[] = [];
  private readonly waiters: Array<{ type: Out['type']; resolve: (m: Out) => void; reject: (e: Error) => void }> = [];
  private exited?: Error;
  private readonly exit: Promise<void>;

  constructor(private readonly child: ChildProcess) {
    child.on('message', (message: Out | Failed) => {
      if (message.type === 'failed') return this.fail(new Error(`bench child ${child.pid} failed: ${(message as Failed).error}`));
      const waiter = this.waiters.findIndex((w) => w.type === message.type);
      if (waiter >= 0) this.waiters.splice(waiter, 1)[0].resolve(message as Out);
      else this.inbox.push(message as Out);
    });
    this.exit = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.fail(new Error(`bench child ${child.pid} exited (${signal ?? code})`));
        resolve();
      }),
    );
  }

  send(message: In): void {
    if (this.exited) throw this.exited;
    this.child.send(message as object);
  }

  /** The next message of `type`; rejects if the child fails or exits first. */
  next<T extends Out['type']>(type: T): Promise<Extract<Out, { type: T }>> {
    const queued = this.inbox.findIndex((m) => m.type === type);
    if (queued >= 0) return Promise.resolve(this.inbox.splice(queued, 1)[0] as Extract<Out, { type: T }>);
    if (this.exited) return Promise.reject(this.exited);
    return new Promise((resolve, reject) => this.waiters.push({ type, resolve: resolve as (m: Out) => void, reject }));
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
      this.workers.push(new WorkerProcess(forkBenchChild('cluster.worker.ts')));
    }
    return this.workers.slice(0, count);
  }

  async kill(): Promise<void> {
    const workers = this.workers.splice(0);
    await Promise.all(workers.map((w) => w.kill()));
  }
}
