import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis, { RedisOptions } from 'ioredis';
import { freePort } from './redis-server';

/**
 * Fault-injection tools for a redis-server of the test's own: one it can SIGKILL, SIGSTOP/SIGCONT
 * and restart on the same port and data directory (so an AOF survives the restart), plus an admin
 * connection that kills clients by name or type and pauses writes. Used by test/chaos.
 *
 * Never touches 127.0.0.1:6379 or any server it did not start: the admin helpers take the
 * connection they act through, and a RedisProcess refuses port 6379.
 */

export interface RedisProcessOptions {
  /** Extra redis-server arguments, e.g. ['--appendonly', 'yes', '--appendfsync', 'always']. They come after the defaults, so they win. */
  args?: string[];
  /** A loopback port; default: a free one. */
  port?: number;
  /** The data directory (AOF, RDB); default: a fresh temporary directory, removed by stop(). */
  dir?: string;
  /**
   * Remove `dir` on stop() (and in the fault suite's teardown) even though the caller chose it —
   * for a caller that must know the directory before the start, e.g. to name a cluster's
   * nodes.conf in the arguments. Default: only a directory this created.
   */
  ownsDir?: boolean;
  /** How long to wait for "Ready to accept connections" (a restart replays the AOF first). */
  readyTimeoutMs?: number;
}

export type ProcessState = 'running' | 'stopped' | 'exited';

/**
 * Servers a failed test leaves running are killed by the fault suite's global teardown
 * (chaos.global-teardown.ts): each incarnation registers a file `<pid>` → { port, dir, ownsDir } in the
 * run's directory (SLUICE_CHAOS_RUN_DIR, set by chaos.global-setup.ts) and unregisters when it
 * exits. Outside that suite nothing is registered: stop() your servers.
 */
function register(pid: number, port: number, dir: string, ownsDir: boolean): void {
  const runDir = process.env.SLUICE_CHAOS_RUN_DIR;
  if (runDir) writeFileSync(join(runDir, String(pid)), JSON.stringify({ port, dir, ownsDir }));
}

function unregister(pid: number): void {
  const runDir = process.env.SLUICE_CHAOS_RUN_DIR;
  if (runDir) rmSync(join(runDir, String(pid)), { force: true });
}

/**
 * Kills (SIGKILL) the registered servers of a run still alive — checking /proc that the pid is
 * still that redis-server, on that port — and removes the directories they owned. Returns
 * `<pid>:<port>` of each one killed.
 */
export function killRegisteredServers(runDir: string): string[] {
  const killed: string[] = [];
  for (const name of readdirSync(runDir)) {
    const { port, dir, ownsDir } = JSON.parse(readFileSync(join(runDir, name), 'utf8')) as { port: number; dir: string; ownsDir: boolean };
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch {
      // gone already
    }
    // redis-server retitles itself 'redis-server 127.0.0.1:<port>'; before that, its argv has --port <port>.
    if (cmdline.includes('redis-server') && (cmdline.includes(`:${port}`) || cmdline.includes(`--port ${port} `))) {
      try {
        process.kill(Number(name), 'SIGKILL');
        killed.push(`${name}:${port}`);
      } catch {
        // exited meanwhile
      }
    }
    if (ownsDir) rmSync(dir, { recursive: true, force: true });
    rmSync(join(runDir, name), { force: true });
  }
  return killed;
}

export class RedisProcess {
  private child!: ChildProcess;
  private exited!: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private output = '';
  private readonly ownsDir: boolean;

  private constructor(
    readonly port: number,
    readonly dir: string,
    readonly args: string[],
    private readonly readyTimeoutMs: number,
    ownsDir: boolean,
  ) {
    this.ownsDir = ownsDir;
  }

  /** Starts redis-server on 127.0.0.1 and resolves once it accepts connections. */
  static async start(options: RedisProcessOptions = {}): Promise<RedisProcess> {
    const port = options.port ?? (await freePort());
    if (port === 6379) throw new Error('RedisProcess: refusing port 6379 (it may be a real Redis)');
    const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'sluice-chaos-redis-'));
    const server = new RedisProcess(
      port,
      dir,
      options.args ?? [],
      options.readyTimeoutMs ?? 20_000,
      options.ownsDir ?? options.dir === undefined,
    );
    try {
      await server.spawn();
    } catch (error) {
      if (server.ownsDir) rmSync(dir, { recursive: true, force: true });
      throw error;
    }
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** The pid of the current incarnation (changes on restart). */
  get pid(): number {
    return this.child.pid!;
  }

  /** Everything the current incarnation wrote to stdout and stderr (for failure messages). */
  get log(): string {
    return this.output;
  }

  /** Running, stopped (SIGSTOP) or exited, read from /proc (Linux). */
  state(): ProcessState {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return 'exited';
    return processState(this.pid);
  }

  /**
   * Sends `signal` and resolves once it took effect: SIGKILL (or SIGTERM…) when the process has
   * exited, SIGSTOP when it is stopped, SIGCONT when it runs again (the last two are read from
   * /proc: Node has no event for them). A stopped server accepts TCP connections into its backlog
   * but answers nothing; its clients see silence, not an error.
   */
  async kill(signal: NodeJS.Signals): Promise<void> {
    if (this.state() === 'exited') throw new Error(`redis-server ${this.port} is not running`);
    if (signal === 'SIGSTOP' || signal === 'SIGCONT') {
      await signalProcess(this.pid, signal);
      return;
    }
    // A stopped process does not act on SIGTERM until continued (SIGKILL works regardless).
    if (signal !== 'SIGKILL' && this.state() === 'stopped') process.kill(this.pid, 'SIGCONT');
    this.child.kill(signal);
    await this.exited;
  }

  /**
   * Starts the server again on the same port, with the same arguments and data directory, so
   * with `--appendonly yes` it reloads what it had persisted. A server still running is first
   * killed with `signal` (SIGKILL: a crash, nothing flushed beyond what the fsync policy wrote).
   */
  async restart(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.state() !== 'exited') await this.kill(signal);
    await this.spawn();
  }

  /** Stops the server (SIGTERM, SIGKILL after 5 s) and removes its directory if this created it. */
  async stop(): Promise<void> {
    if (this.state() !== 'exited') {
      if (this.state() === 'stopped') process.kill(this.pid, 'SIGCONT');
      const hard = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
      this.child.kill('SIGTERM');
      await this.exited.finally(() => clearTimeout(hard));
    }
    if (this.ownsDir) rmSync(this.dir, { recursive: true, force: true });
  }

  /** A new connection to this server (the caller closes it). Reconnects on its own after a restart. */
  connect(options: RedisOptions = {}): Redis {
    return new Redis(this.port, '127.0.0.1', { maxRetriesPerRequest: null, ...options });
  }

  private spawn(): Promise<void> {
    this.output = '';
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, ...this.args],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.child = child;
    // A server a failed test leaves behind must not keep the test process alive (the suite's
    // teardown kills it).
    child.unref();
    (child.stdout as unknown as { unref(): void }).unref();
    (child.stderr as unknown as { unref(): void }).unref();
    if (child.pid) {
      register(child.pid, this.port, this.dir, this.ownsDir);
      const pid = child.pid;
      child.once('exit', () => unregister(pid));
    }
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const collect = (chunk: Buffer) => {
      // Keep the tail only: a long test must not accumulate the whole log.
      this.output = (this.output + chunk.toString()).slice(-20_000);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => fail(new Error(`redis-server on port ${this.port} not ready after ${this.readyTimeoutMs} ms:\n${this.output}`)),
        this.readyTimeoutMs,
      );
      const onData = () => {
        if (this.output.includes('Ready to accept connections')) {
          cleanup();
          resolve();
        }
      };
      const onExit = (code: number | null) =>
        fail(new Error(`redis-server on port ${this.port} exited with code ${code}:\n${this.output}`));
      const onError = (error: Error) => fail(new Error(`cannot start redis-server (is it installed?): ${error.message}`));
      const cleanup = () => {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        child.off('exit', onExit);
        child.off('error', onError);
      };
      const fail = (error: Error) => {
        cleanup();
        child.kill('SIGKILL');
        reject(error);
      };
      child.stdout.on('data', onData);
      child.once('exit', onExit);
      child.once('error', onError);
    });
  }
}

/** A process's state from /proc/<pid>/stat: 'stopped' for T (stopped) and t (traced), 'exited' once gone or a zombie. */
export function processState(pid: number): ProcessState {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return 'exited';
  }
  // The state follows the parenthesised command name, which may itself contain spaces or ')'.
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  if (state === 'T' || state === 't') return 'stopped';
  if (state === 'Z' || state === 'X') return 'exited';
  return 'running';
}

/**
 * Sends SIGSTOP or SIGCONT to any process (a redis-server, a forked worker) and resolves once
 * /proc shows it took effect — there is no event for it — failing after `timeoutMs`.
 */
export async function signalProcess(pid: number, signal: 'SIGSTOP' | 'SIGCONT', timeoutMs = 5_000): Promise<void> {
  const want: ProcessState = signal === 'SIGSTOP' ? 'stopped' : 'running';
  process.kill(pid, signal);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = processState(pid);
    if (state === want) return;
    if (state === 'exited') throw new Error(`process ${pid} exited while waiting for ${signal} to take effect`);
    if (Date.now() > deadline) throw new Error(`process ${pid} not ${want} ${timeoutMs} ms after ${signal}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** One line of CLIENT LIST, with the fields tests use parsed and every field kept raw. */
export interface ClientInfo {
  id: string;
  name: string;
  /** The client's address as the server sees it, `ip:port`. */
  addr: string;
  /** 'normal' or 'pubsub' (from the flags: P = subscriber), or 'replica'/'master'. */
  type: 'normal' | 'pubsub' | 'replica' | 'master';
  flags: string;
  /** The last command it ran, e.g. 'blpop', 'fcall'. */
  cmd: string;
  fields: Record<string, string>;
}

export interface ClientFilter {
  /** Connection name prefix, e.g. `sluice:<namespace>:` (see {@link sluiceConnectionName}). */
  namePrefix?: string;
  type?: 'normal' | 'pubsub';
}

/** The name Sluice gives a connection (CLIENT SETNAME): `sluice:<namespace>:<role>`; without role, the prefix of all of a namespace's. */
export function sluiceConnectionName(namespace: string, role?: 'command' | 'blocking' | 'subscriber'): string {
  return `sluice:${namespace}:${role ?? ''}`;
}

export function parseClientList(list: string): ClientInfo[] {
  return list
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const fields: Record<string, string> = {};
      // name= can be empty; values never contain spaces (Redis refuses such names).
      for (const part of line.trim().split(' ')) {
        const eq = part.indexOf('=');
        if (eq > 0) fields[part.slice(0, eq)] = part.slice(eq + 1);
      }
      const flags = fields.flags ?? '';
      const type = flags.includes('S') ? 'replica' : flags.includes('M') ? 'master' : flags.includes('P') ? 'pubsub' : 'normal';
      return { id: fields.id, name: fields.name ?? '', addr: fields.addr ?? '', type, flags, cmd: fields.cmd ?? '', fields };
    });
}

/**
 * CLIENT KILL, CLIENT PAUSE and CLIENT UNPAUSE through an admin connection of the test's own (on
 * a server the test started). The admin connection never kills itself.
 */
export class RedisAdmin {
  constructor(readonly redis: Redis) {}

  /** CLIENT LIST, filtered by name prefix and/or type (pubsub = a connection in subscribed state). */
  async clients(filter: ClientFilter = {}): Promise<ClientInfo[]> {
    const list = (await this.redis.client('LIST')) as string;
    return parseClientList(list).filter(
      (c) =>
        (filter.namePrefix === undefined || c.name.startsWith(filter.namePrefix)) && (filter.type === undefined || c.type === filter.type),
    );
  }

  /**
   * Kills the connections matching `filter` (CLIENT KILL ID, one per connection: CLIENT KILL has
   * no name filter) and returns those it killed. An empty filter is refused: it would kill every
   * client of the server.
   */
  async killClients(filter: ClientFilter): Promise<ClientInfo[]> {
    if (filter.namePrefix === undefined && filter.type === undefined) throw new Error('killClients: give a namePrefix and/or a type');
    const self = String(await this.redis.client('ID'));
    const targets = (await this.clients(filter)).filter((c) => c.id !== self);
    const killed: ClientInfo[] = [];
    for (const client of targets) {
      // 1 if it was still there; a client that left on its own in between is not counted.
      const n = Number(await this.redis.call('CLIENT', 'KILL', 'ID', client.id, 'SKIPME', 'yes'));
      if (n > 0) killed.push(client);
    }
    return killed;
  }

  /**
   * CLIENT PAUSE <ms> WRITE: clients running write commands (including EVAL/EVALSHA and blocking
   * pops) wait until the pause ends or {@link unpause}; reads carry on.
   */
  async pauseWrites(ms: number): Promise<void> {
    await this.redis.call('CLIENT', 'PAUSE', String(ms), 'WRITE');
  }

  /** CLIENT PAUSE <ms> ALL: every client's commands wait. */
  async pauseAll(ms: number): Promise<void> {
    await this.redis.call('CLIENT', 'PAUSE', String(ms), 'ALL');
  }

  async unpause(): Promise<void> {
    await this.redis.call('CLIENT', 'UNPAUSE');
  }

  /**
   * Waits (polling CLIENT LIST: no event exists) until the clients matching `filter` satisfy
   * `ready`, e.g. until a worker's connections reconnected after a kill. Returns the last list.
   */
  async clientsWhen(
    filter: ClientFilter,
    ready: (clients: ClientInfo[]) => boolean,
    what: string,
    timeoutMs = 10_000,
  ): Promise<ClientInfo[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const clients = await this.clients(filter);
      if (ready(clients)) return clients;
      if (Date.now() > deadline)
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${what}; clients: ${JSON.stringify(clients.map((c) => `${c.name}@${c.addr}(${c.type})`))}`,
        );
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  close(): Promise<void> {
    return this.redis.quit().then(
      () => undefined,
      () => this.redis.disconnect(),
    );
  }
}
