import 'reflect-metadata';
import { LoggerService, Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { QueueClient, QueueModule, QueueModuleOptions, RunEvents } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { testConnection, TestApp } from './app';
import { deferred } from './workflows';

/**
 * Helpers for the flow-control tests (caps, groups, fairness, stats): apps whose log lines the
 * test reads, in-process concurrency gauges, samplers of Redis state, and raw key names.
 */

/** A Nest logger that keeps every line, so a test can assert what was logged. */
export class CapturingLogger implements LoggerService {
  readonly lines: string[] = [];
  log(message: unknown, context?: string) {
    this.lines.push(`${context ?? ''}: ${String(message)}`);
  }
  error(message: unknown, ...rest: unknown[]) {
    this.lines.push(`error: ${String(message)} ${rest.join(' ')}`);
  }
  warn(message: unknown, context?: string) {
    this.lines.push(`${context ?? ''}: ${String(message)}`);
  }
  debug() {}
  verbose() {}
}

export interface FlowApp extends TestApp {
  events: RunEvents;
}

/** Like `createApp`, with the logger the test chooses (Nest's logger is process-wide: the last app's choice wins). */
export async function startFlowApp(
  providers: Provider[],
  options: Partial<QueueModuleOptions> & { namespace: string },
  logger: LoggerService | false = false,
): Promise<FlowApp> {
  const app = await Test.createTestingModule({
    imports: [QueueModule.forRoot({ connection: testConnection(), ...options })],
    providers,
  }).compile();
  app.useLogger(logger);
  await app.init();
  return { app, client: app.get(QueueClient), events: app.get(RunEvents), close: () => app.close() };
}

/** Resolves once the apps' workers have reported `count` completed runs in total (an event, no polling). */
export function completions(apps: FlowApp[], count: number, workflow?: string): Promise<void> {
  const done = deferred();
  let seen = 0;
  const offs = apps.map((app) =>
    app.events.on('completed', (event) => {
      if (workflow !== undefined && event.workflow !== workflow) return;
      if (++seen === count) {
        offs.forEach((off) => off());
        done.resolve();
      }
    }),
  );
  return done.promise;
}

/** Counts runs executing right now in this process, per key, and the most seen at once. */
export class LiveGauge {
  private readonly now = new Map<string, number>();
  private readonly peak = new Map<string, number>();

  enter(key: string): void {
    const next = (this.now.get(key) ?? 0) + 1;
    this.now.set(key, next);
    this.peak.set(key, Math.max(next, this.peak.get(key) ?? 0));
  }

  leave(key: string): void {
    this.now.set(key, (this.now.get(key) ?? 0) - 1);
  }

  current(key: string): number {
    return this.now.get(key) ?? 0;
  }

  max(key: string): number {
    return this.peak.get(key) ?? 0;
  }

  /** Starts a new peak measurement for `key` from its current count. */
  resetMax(key: string): void {
    this.peak.set(key, this.current(key));
  }
}

/**
 * Calls `read` back to back (a 1 ms pause between calls) until stopped: a measurement of state
 * that changes on its own, not a synchronisation. `stop` returns every sample taken.
 */
export function sample<T>(read: () => Promise<T>): { samples: T[]; stop(): Promise<T[]> } {
  const samples: T[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      samples.push(await read());
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  })();
  return {
    samples,
    async stop() {
      running = false;
      await loop;
      return samples;
    },
  };
}

/** Raw key names of a namespace (see lib/redis/redis.keys.ts). */
export function flowKeys(namespace: string) {
  const keys = new RedisKeys('sluice', namespace);
  return {
    keys,
    active: (workflow: string) => keys.workflow(workflow, 'active'),
    groupActive: (workflow: string, group: string) => keys.lane(workflow, group, 'active'),
    ready: (workflow: string) => keys.workflow(workflow, 'ready'),
    groups: (workflow: string) => keys.workflow(workflow, 'groups'),
    wake: (workflow: string) => keys.workflow(workflow, 'wake'),
    parked: (workflow: string) => keys.workflow(workflow, 'parked'),
  };
}

/** Registers a parked worker that never blocks: the fast path sees a taker, but nobody takes. */
export async function fakeParked(redis: Redis, parkedKey: string): Promise<void> {
  await redis.zadd(parkedKey, Date.now() + 3_600_000, 'fake');
}

/** SCARD of several sets in one round trip (one consistent snapshot). */
export async function cardinalities(redis: Redis, keys: string[]): Promise<number[]> {
  const replies = (await keys.reduce((multi, key) => multi.scard(key), redis.multi()).exec()) ?? [];
  return replies.map(([error, n]) => {
    if (error) throw error;
    return Number(n);
  });
}

/** Rejects with a clear message if `promise` does not settle within `ms` (a deadline for a test that would otherwise hang). */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
