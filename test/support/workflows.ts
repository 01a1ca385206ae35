import type { Cluster } from 'ioredis';
import type Redis from 'ioredis';
import { rawRedis } from './app';
import { isCluster, namespaceNode } from './nodes';
import { scanKeys } from './scan';
import IORedis from 'ioredis';

/** A promise the test settles itself, e.g. to hold a run open until the test lets it finish. */
export interface Deferred<T = void> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Keyed gates: a workflow awaits `gates.get(key).promise`, the test calls `open(key)`. */
export class Gates {
  private readonly gates = new Map<string, Deferred<void>>();

  get(key: string): Deferred<void> {
    let gate = this.gates.get(key);
    if (!gate) this.gates.set(key, (gate = deferred()));
    return gate;
  }

  open(key: string): void {
    this.get(key).resolve();
  }

  openAll(): void {
    this.gates.forEach((gate) => gate.resolve());
  }
}

/** Counts side effects by key, e.g. `${runId}:stepA`. */
export class Counter {
  private readonly counts = new Map<string, number>();

  inc(key: string): number {
    const next = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, next);
    return next;
  }

  get(key: string): number {
    return this.counts.get(key) ?? 0;
  }
}

/**
 * Polls `read` until `done` holds, for state that has no event to await (e.g. a run becoming
 * 'active' in Redis). Bounded: fails with `what` after `timeoutMs`.
 */
export async function pollUntil<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Every key of a namespace (SCAN, never KEYS; on a cluster, every master's). */
export function namespaceKeys(redis: Redis, namespace: string, prefix = 'sluice'): Promise<string[]> {
  return scanKeys(redis, `{${prefix}:${namespace}}:*`);
}

/**
 * ioredis' monitor(), without its race on a busy server: the connection enters the monitoring
 * state a tick after MONITOR's OK, so command lines arriving in the same read as that OK look
 * like replies to no command ("Command queue state error"), which monitor() turns into a
 * rejection. Those lines are commands executed before the caller can have sent any of its own:
 * dropping them is harmless.
 */
export function enterMonitor(connection: IORedis): Promise<IORedis> {
  const monitor = connection.duplicate({ monitor: true, lazyConnect: false });
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => {
      if (/Command queue state error/.test(error.message) && (monitor.status as string) !== 'monitoring') return;
      monitor.off('error', onError);
      monitor.disconnect();
      reject(error);
    };
    monitor.on('error', onError);
    monitor.once('monitoring', () => {
      monitor.off('error', onError);
      resolve(monitor);
    });
  });
}

/**
 * Watches the commands the server executes (MONITOR), to synchronise with a command another
 * connection sends, e.g. the waiter's read of a run record. On a cluster, MONITOR shows one
 * node's commands: `namespace` names the one to watch (the master serving that namespace, where
 * Sluice sends all its commands); on a single server it makes no difference. `server`: a
 * connection to the server to watch, when it is not the shared test server (e.g. a test's own).
 */
/** A command MONITOR showed, lower-cased name first; `source`: 'lua' for a script's, else the client's address. */
/** A command MONITOR saw: its arguments, the client that sent it, and when Redis ran it (ms). */
export type MonitoredCommand = string[] & { source?: string; atMs?: number };

export async function monitorCommands(
  namespace?: string,
  server?: IORedis,
): Promise<{ next(match: (args: string[]) => boolean, timeoutMs?: number): Promise<string[]>; close(): Promise<void> }> {
  const connection = server ? server.duplicate() : rawRedis();
  if (namespace === undefined && isCluster(connection as Redis | Cluster)) {
    connection.disconnect();
    throw new Error('monitorCommands on a cluster: pass the namespace whose node to watch');
  }
  const monitor = await enterMonitor(namespace === undefined ? connection : await namespaceNode(connection, namespace));
  const seen: string[][] = [];
  const pending: Array<{ match: (args: string[]) => boolean; resolve: (args: string[]) => void }> = [];
  monitor.on('monitor', (time: string, args: string[], source: string) => {
    const normalised: MonitoredCommand = [String(args[0]).toLowerCase(), ...args.slice(1).map(String)];
    normalised.source = source;
    normalised.atMs = Number(time) * 1000;
    const index = pending.findIndex((p) => p.match(normalised));
    if (index >= 0) pending.splice(index, 1)[0].resolve(normalised);
    else seen.push(normalised);
  });
  return {
    /** The next executed command (not yet consumed) that `match` accepts. */
    next(match, timeoutMs = 10_000) {
      const earlier = seen.findIndex(match);
      if (earlier >= 0) return Promise.resolve(seen.splice(earlier, 1)[0]);
      return new Promise((resolve, reject) => {
        const entry = { match, resolve: (args: string[]) => (clearTimeout(timer), resolve(args)) };
        const timer = setTimeout(() => {
          pending.splice(pending.indexOf(entry), 1);
          reject(new Error(`no matching command within ${timeoutMs} ms`));
        }, timeoutMs);
        pending.push(entry);
      });
    },
    async close() {
      monitor.disconnect();
      connection.disconnect();
    },
  };
}

/**
 * Every command the monitor saw before `redis` sent `EXISTS <sentinel>` (sent here): all the
 * commands the server ran up to now, with no timing guess.
 */
export async function commandsBefore(
  monitor: Awaited<ReturnType<typeof monitorCommands>>,
  redis: Pick<IORedis, 'exists'>,
  sentinel: string,
): Promise<MonitoredCommand[]> {
  await redis.exists(sentinel);
  const seen: MonitoredCommand[] = [];
  for (let args = await monitor.next(() => true); !(args[0] === 'exists' && args[1] === sentinel); args = await monitor.next(() => true)) {
    seen.push(args);
  }
  return seen;
}

/** A workflow's stats counts of runs in durable waits, when it has none. */
export const NO_WAITS = { sleeping: 0, waitingSignal: 0, waitingEvent: 0, waitingChild: 0 };
