import 'reflect-metadata';
import { Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import Redis from 'ioredis';
import { QueueClient, QueueModule, QueueModuleOptions } from '../../lib';
import { pollUntil } from './workflows';

/**
 * Fault injection on a redis-server of the test's own (CLIENT PAUSE pauses every client of a
 * server, so these tests never use a shared one): hold a connection's next script with
 * `CLIENT PAUSE … WRITE`, then kill that connection while the script waits — the deterministic
 * way to lose a command in flight.
 */
export class ConnectionFaults {
  constructor(private readonly admin: Redis) {}

  /** Pauses every write command (scripts included) of every client until {@link unpause}. */
  async pauseWrites(ms = 30_000): Promise<void> {
    await this.admin.client('PAUSE', ms, 'WRITE');
  }

  async unpause(): Promise<void> {
    await this.admin.client('UNPAUSE');
  }

  /** CLIENT LIST lines of the connections named `name`. */
  async clients(name: string): Promise<string[]> {
    const list = (await this.admin.client('LIST')) as string;
    return list.split('\n').filter((line) => line.includes(` name=${name} `));
  }

  /** Waits until the connection named `name` is held by the pause with a script (`cmd=evalsha|eval`). */
  async heldScript(name: string, timeoutMs = 10_000): Promise<string> {
    const lines = await pollUntil(
      () => this.clients(name),
      (found) => found.some((line) => /flags=\S*b/.test(line) && /cmd=eval/.test(line)),
      `a script of ${name} held by the pause`,
      timeoutMs,
    );
    return lines.find((line) => /flags=\S*b/.test(line))!;
  }

  /** Kills the connection(s) named `name`; returns how many were killed. */
  async kill(name: string): Promise<number> {
    let killed = 0;
    for (const line of await this.clients(name)) {
      const id = /(?:^| )id=(\d+)/.exec(line)?.[1];
      if (id) killed += Number(await this.admin.client('KILL', 'ID', id));
    }
    return killed;
  }

  /** The whole fault: hold `name`'s next script, kill its connection, release the pause. */
  async dropDuringScript<T>(name: string, trigger: () => Promise<T>): Promise<T> {
    await this.pauseWrites();
    const result = trigger();
    result.catch(() => undefined); // awaited by the caller
    try {
      await this.heldScript(name);
      expectKilled(await this.kill(name));
    } finally {
      await this.unpause();
    }
    return result;
  }
}

function expectKilled(killed: number): void {
  if (killed < 1) throw new Error('no connection was killed');
}

/** A Nest app with QueueModule on a given Redis URL (not the shared test server), initialised. */
export async function appOn(url: string, providers: Provider[], options: Partial<QueueModuleOptions> & { namespace: string }) {
  const app = await Test.createTestingModule({
    imports: [QueueModule.forRoot({ connection: { url }, ...options })],
    providers,
  }).compile();
  app.useLogger(process.env.SLUICE_TEST_LOGS ? ['log', 'warn', 'error'] : false);
  await app.init();
  return { app, client: app.get(QueueClient), close: () => app.close() };
}

/** A redis-server on a fixed port and data directory, so it can be killed and started again as the same server. */
export interface RestartableRedis {
  url: string;
  port: number;
  /** Starts it (again) on the same port and directory; AOF data written before a kill is reloaded. */
  start(): Promise<void>;
  /** Sends a signal to the running server (SIGKILL: a crash; SIGSTOP/SIGCONT: a freeze). */
  signal(signal: NodeJS.Signals): void;
  /** Kills it with SIGKILL and waits for the exit. */
  crash(): Promise<void>;
  /** Stops it for good and removes its directory. */
  stop(): Promise<void>;
}

export async function restartableRedis(extraArgs: string[] = []): Promise<RestartableRedis> {
  const { spawn } = await import('node:child_process');
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { freePort } = await import('./redis-server');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'sluice-restart-'));
  let child: import('node:child_process').ChildProcess | undefined;
  const exited = () => new Promise<void>((resolve) => (!child || child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));
  const server: RestartableRedis = {
    url: `redis://127.0.0.1:${port}`,
    port,
    async start() {
      child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir, ...extraArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
      const started = child;
      await new Promise<void>((resolve, reject) => {
        let output = '';
        const timer = setTimeout(() => reject(new Error(`redis-server on ${port} not ready:\n${output}`)), 20_000);
        started.stdout!.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          if (/Ready to accept connections/.test(output)) {
            clearTimeout(timer);
            resolve();
          }
        });
        started.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`redis-server exited with ${code}:\n${output}`));
        });
      });
      started.stdout!.resume();
      started.stderr!.resume();
    },
    signal(signal) {
      child?.kill(signal);
    },
    async crash() {
      child?.kill('SIGKILL');
      await exited();
    },
    async stop() {
      child?.kill('SIGKILL');
      await exited();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}
