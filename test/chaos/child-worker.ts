import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export type ChildMessage = Record<string, unknown>;

/**
 * One forked worker process (test/chaos/worker.process.ts, or another `script`, run through
 * ts-node) and its IPC messages. Every wait is an event (a message or the exit) with a deadline,
 * never a sleep.
 */
export class ChildWorker {
  readonly proc: ChildProcess;
  readonly exited: Promise<ChildExit>;
  private readonly messages: ChildMessage[] = [];
  private readonly listeners = new Set<() => void>();
  private exit?: ChildExit;

  constructor(env: Record<string, string>, script = join(__dirname, 'worker.process.ts')) {
    this.proc = fork(script, [], {
      execArgv: ['-r', 'ts-node/register/transpile-only'],
      env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true', ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.proc.on('message', (message) => {
      this.messages.push(message as ChildMessage);
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

  /** The first message (already received or to come) matching `match`; rejects if the child exits first or on the deadline. */
  waitFor(match: (message: ChildMessage) => boolean, what: string, timeoutMs = 60_000): Promise<ChildMessage> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => settle(() => reject(new Error(`child ${this.pid}: no ${what} within ${timeoutMs} ms`))), timeoutMs);
      const settle = (fn: () => void) => {
        clearTimeout(timer);
        this.listeners.delete(check);
        fn();
      };
      const check = () => {
        const found = this.messages.find(match);
        if (found) return settle(() => resolve(found));
        if (this.exit) settle(() => reject(new Error(`child ${this.pid} exited (${JSON.stringify(this.exit)}) before ${what}`)));
      };
      this.listeners.add(check);
      check();
    });
  }

  send(message: string): void {
    this.proc.send(message);
  }

  /** Asks the child to close its app; resolves with its exit and its last report. */
  async stop(timeoutMs = 20_000): Promise<ChildExit & { report: ChildMessage }> {
    this.send('stop');
    const report = await this.waitFor((m) => m.stopped === true, 'stop report', timeoutMs);
    const exit = await Promise.race([
      this.exited,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`child ${this.pid} did not exit after stopping`)), timeoutMs).unref(),
      ),
    ]);
    return { ...exit, report };
  }

  /** For cleanup after a failed test: kills this child (by its pid) if it still runs. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<ChildExit> {
    if (!this.exit) this.proc.kill(signal);
    return this.exited;
  }
}
