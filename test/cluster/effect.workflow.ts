import 'reflect-metadata';
import { Inject } from '@nestjs/common';
import type Redis from 'ioredis';
import { RunContext, Step, Workflow } from '../../lib';

/**
 * The workflow of the cluster fault tests (failover.spec.ts, migration-drain.spec.ts), run by
 * forked worker processes (cluster-worker.process.ts). Its one step is a side effect counted on a
 * plain redis-server outside the cluster (the suite's REDIS_URL), so a fault of the cluster cannot
 * lose or fake the count: each execution of the step, each committed completion and each stall
 * or failure a worker reports is recorded there, per run id, with the time and the attempt.
 */
export const EFFECT_WORKFLOW = 'cluster.effect';
export const EFFECT_REDIS = 'EFFECT_REDIS';
export const EFFECT_NS = 'EFFECT_NS';
export const EFFECT_STEP_MS = 'EFFECT_STEP_MS';

/** Keys on the plain server, one set per namespace (the namespace is random per test). */
export const effectKeys = (ns: string) => ({
  /** runId → executions of the step. */
  exec: `cluster-test:${ns}:exec`,
  /** `<runId> <attempt> <ms> <pid>` per execution of the step, in order. */
  execLog: `cluster-test:${ns}:exec-log`,
  /** runId → 'completed' events (emitted once the completion is committed in Redis). */
  commits: `cluster-test:${ns}:commits`,
  /** `<runId> <attempt> <ms> <pid>` per 'completed' event, in order. */
  commitLog: `cluster-test:${ns}:commit-log`,
  /** `<event> <runId> <attempt|stalls> <ms> <detail>` per 'failed' / 'stalled' event. */
  otherLog: `cluster-test:${ns}:other-log`,
});

export interface EffectResult {
  i: number;
  /** Which execution of the step (1 unless it executed again) the memo holds. */
  n: number;
}

@Workflow(EFFECT_WORKFLOW)
export class EffectWorkflow {
  constructor(
    @Inject(EFFECT_REDIS) private readonly redis: Redis,
    @Inject(EFFECT_NS) private readonly ns: string,
    @Inject(EFFECT_STEP_MS) private readonly stepMs: number,
  ) {}

  async run(input: { i: number }, ctx: RunContext): Promise<EffectResult> {
    const n = await this.effect(ctx.runId, ctx.attempt);
    return { i: input.i, n };
  }

  /** The side effect: counted (with its attempt and time) before the step's work, which takes stepMs. */
  @Step()
  async effect(runId: string, attempt: number): Promise<number> {
    const keys = effectKeys(this.ns);
    const replies = await this.redis
      .multi()
      .hincrby(keys.exec, runId, 1)
      .rpush(keys.execLog, `${runId} ${attempt} ${Date.now()} ${process.pid}`)
      .exec();
    const [error, n] = replies![0];
    if (error) throw error;
    // Simulated work, so that runs are in flight at any moment a fault strikes (not a synchronisation).
    if (this.stepMs > 0) await new Promise((resolve) => setTimeout(resolve, this.stepMs));
    return Number(n);
  }
}

/** One line of an exec or commit log. */
export interface LogEntry {
  id: string;
  attempt: number;
  at: number;
  pid: number;
}

export function parseLog(lines: string[]): LogEntry[] {
  return lines.map((line) => {
    const [id, attempt, at, pid] = line.split(' ');
    return { id, attempt: Number(attempt), at: Number(at), pid: Number(pid) };
  });
}

/** Entries grouped by run id, in log order. */
export function byRun(entries: LogEntry[]): Map<string, LogEntry[]> {
  const map = new Map<string, LogEntry[]>();
  for (const entry of entries) map.set(entry.id, [...(map.get(entry.id) ?? []), entry]);
  return map;
}
