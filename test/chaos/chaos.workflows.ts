import 'reflect-metadata';
import { Inject } from '@nestjs/common';
import type Redis from 'ioredis';
import { RunContext, Step, Workflow } from '../../lib';

/**
 * Workflows shared by the chaos tests and the forked worker process (test/chaos/worker.process.ts).
 * Side effects go to Redis hashes of the test's namespace, so they are counted across processes.
 */
export const CHAOS_REDIS = 'CHAOS_REDIS';
export const CHAOS_NS = 'CHAOS_NS';
export const CHAOS_HOOKS = 'CHAOS_HOOKS';

/** What the host process (child or test) plugs into the workflows. */
export interface ChaosHooks {
  /** Drain: awaited at the start of every run (the child holds runs here until told to go). */
  beforeWork?(runId: string): Promise<void>;
  /** Drain: called after the counting step executed (not when it was replayed). */
  counted?(runId: string): void;
  /** Stall: awaited after the first step finished (the child announces it and hangs). */
  afterFirstStep?(runId: string): Promise<void>;
  /** Zombie: awaited where the run's input says (the child announces it and waits for 'resume'). */
  pause?(runId: string, where: 'middle' | 'end'): Promise<void>;
  /** Zombie: a step threw (e.g. LeaseLostError: its result was refused); the run rethrows it. */
  stepFailed?(runId: string, step: string, error: unknown): void;
}

/** `{sluice:<ns>}:counter` — per-run count of executions of DrainWorkflow's step. */
export const counterKey = (ns: string) => `{sluice:${ns}}:counter`;
/** `{sluice:<ns>}:step-count` — `<runId>:<step>` → executions of StallWorkflow's steps. */
export const stepCountKey = (ns: string) => `{sluice:${ns}}:step-count`;

@Workflow('chaos.drain')
export class DrainWorkflow {
  constructor(
    @Inject(CHAOS_REDIS) private readonly redis: Redis,
    @Inject(CHAOS_NS) private readonly ns: string,
    @Inject(CHAOS_HOOKS) private readonly hooks: ChaosHooks,
  ) {}

  async run(input: { i: number }, ctx: RunContext): Promise<{ i: number }> {
    await this.hooks.beforeWork?.(ctx.runId);
    await this.count(ctx.runId);
    return { i: input.i };
  }

  @Step()
  async count(runId: string): Promise<number> {
    const n = await this.redis.hincrby(counterKey(this.ns), runId, 1);
    this.hooks.counted?.(runId);
    return n;
  }
}

@Workflow('chaos.stall')
export class StallWorkflow {
  constructor(
    @Inject(CHAOS_REDIS) private readonly redis: Redis,
    @Inject(CHAOS_NS) private readonly ns: string,
    @Inject(CHAOS_HOOKS) private readonly hooks: ChaosHooks,
  ) {}

  async run(_input: { label: string }, ctx: RunContext): Promise<{ first: string; second: string; attempt: number }> {
    const first = await this.first(ctx.runId);
    await this.hooks.afterFirstStep?.(ctx.runId);
    const second = await this.second(ctx.runId);
    return { first, second, attempt: ctx.attempt };
  }

  @Step()
  async first(runId: string): Promise<string> {
    await this.redis.hincrby(stepCountKey(this.ns), `${runId}:first`, 1);
    return `first by pid ${process.pid}`;
  }

  @Step()
  async second(runId: string): Promise<string> {
    await this.redis.hincrby(stepCountKey(this.ns), `${runId}:second`, 1);
    return `second by pid ${process.pid}`;
  }
}

/** `{sluice:<ns>}:completions` — runId → times CappedWorkflow ran its last step (ran to completion). */
export const completionsKey = (ns: string) => `{sluice:${ns}}:completions`;

/** A workflow whose fleet-wide cap is a single slot; steps are counted in `stepCountKey`. */
@Workflow('chaos.capped', { concurrency: 1 })
export class CappedWorkflow {
  constructor(
    @Inject(CHAOS_REDIS) private readonly redis: Redis,
    @Inject(CHAOS_NS) private readonly ns: string,
    @Inject(CHAOS_HOOKS) private readonly hooks: ChaosHooks,
  ) {}

  async run(_input: { label: string }, ctx: RunContext): Promise<{ first: string; attempt: number }> {
    await this.hooks.beforeWork?.(ctx.runId);
    const first = await this.first(ctx.runId);
    await this.hooks.afterFirstStep?.(ctx.runId);
    await this.finish(ctx.runId);
    return { first, attempt: ctx.attempt };
  }

  @Step()
  async first(runId: string): Promise<string> {
    await this.redis.hincrby(stepCountKey(this.ns), `${runId}:first`, 1);
    return `first by pid ${process.pid}`;
  }

  @Step()
  async finish(runId: string): Promise<number> {
    return this.redis.hincrby(completionsKey(this.ns), runId, 1);
  }
}

/** `{sluice:<ns>}:exec-count` — `<runId>:<step>` → executions of ThreeStepWorkflow's steps (the side effect). */
export const execCountKey = (ns: string) => `{sluice:${ns}}:exec-count`;
/** `{sluice:<ns>}:exec-by` — `<runId>:<step>#<n>` → pid of the process that executed the n-th execution. */
export const execByKey = (ns: string) => `{sluice:${ns}}:exec-by`;
/** `{sluice:<ns>}:attempt-by` — `<runId>#<attempt>` → pid of the process that started that attempt (written before any step). */
export const attemptByKey = (ns: string) => `{sluice:${ns}}:attempt-by`;
/** `{sluice:<ns>}:commits` — runId → 'completed' events (emitted after the commit), counted by the forked workers. */
export const commitsKey = (ns: string) => `{sluice:${ns}}:commits`;
/**
 * `{sluice:<ns>}:despite-memo` — `<runId>:<step>#<n>` → `<pid> attempt <a> of <attempts>`, for an
 * execution by the run's current attempt while the step's memo was already in the run record
 * (lib/redis/redis.keys.ts: field `step:<name>#1` of `run:<id>`): a finished step executed again
 * instead of replaying. Must stay empty.
 */
export const despiteMemoKey = (ns: string) => `{sluice:${ns}}:despite-memo`;
/**
 * `{sluice:<ns>}:late-effects` — as {@link despiteMemoKey}, for a side effect of an attempt that
 * is no longer the run's latest when it lands: the step started before the memo existed, and its
 * command reached Redis late (the harness's own ioredis client queues and re-sends commands across
 * a Redis restart, long after Sluice stopped that attempt). At-least-once allows it; kept apart so
 * a test can tell it from a replay that failed.
 */
export const lateEffectsKey = (ns: string) => `{sluice:${ns}}:late-effects`;

/** One step execution: its ordinal among the executions of that step of that run, and where it ran. */
export interface Execution {
  n: number;
  pid: number;
}

export interface ThreeStepResult {
  i: number;
  a: Execution;
  b: Execution;
  c: Execution;
  attempt: number;
  /** The process whose attempt produced (and committed) this result. */
  by: number;
}

/**
 * The side effect of a step, atomic: count the execution, record which process made it, and
 * whether the step's memo was in the run record already (a step whose memo landed must replay,
 * never execute; the memo of this execution is written only after it returns) — by the run's
 * current attempt (despite-memo) or by a superseded one whose command landed late (late-effects).
 */
const EXECUTE = `local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('HSET', KEYS[2], ARGV[1] .. '#' .. n, ARGV[2])
if redis.call('HEXISTS', KEYS[3], ARGV[3]) == 1 then
  local attempts = redis.call('HGET', KEYS[3], 'attempts') or '?'
  local into = attempts == ARGV[4] and KEYS[4] or KEYS[5]
  redis.call('HSET', into, ARGV[1] .. '#' .. n, ARGV[2] .. ' attempt ' .. ARGV[4] .. ' of ' .. attempts)
end
return n`;

/**
 * Three durable steps, each a counted side effect that records its executing pid. Before its
 * steps, every attempt records which process started it, so a test knows which runs a killed
 * process had in flight. A step's memo is the execution it returned: a test can tell the
 * execution whose memo landed from those that were lost.
 */
@Workflow('chaos.three-step')
export class ThreeStepWorkflow {
  constructor(
    @Inject(CHAOS_REDIS) private readonly redis: Redis,
    @Inject(CHAOS_NS) private readonly ns: string,
    @Inject(CHAOS_HOOKS) private readonly hooks: ChaosHooks,
  ) {}

  async run(input: { i: number }, ctx: RunContext): Promise<ThreeStepResult> {
    await this.redis.hset(attemptByKey(this.ns), `${ctx.runId}#${ctx.attempt}`, process.pid);
    await this.hooks.beforeWork?.(ctx.runId);
    const a = await this.stepA(ctx.runId, ctx.attempt);
    const b = await this.stepB(ctx.runId, ctx.attempt);
    const c = await this.stepC(ctx.runId, ctx.attempt);
    return { i: input.i, a, b, c, attempt: ctx.attempt, by: process.pid };
  }

  @Step()
  stepA(runId: string, attempt: number): Promise<Execution> {
    return this.execute(runId, attempt, 'a', 'stepA');
  }

  @Step()
  stepB(runId: string, attempt: number): Promise<Execution> {
    return this.execute(runId, attempt, 'b', 'stepB');
  }

  @Step()
  stepC(runId: string, attempt: number): Promise<Execution> {
    return this.execute(runId, attempt, 'c', 'stepC');
  }

  private async execute(runId: string, attempt: number, step: string, stepName: string): Promise<Execution> {
    const run = `{sluice:${this.ns}}:run:${runId}`;
    const keys = [execCountKey(this.ns), execByKey(this.ns), run, despiteMemoKey(this.ns), lateEffectsKey(this.ns)];
    const n = await this.redis.eval(EXECUTE, keys.length, ...keys, `${runId}:${step}`, process.pid, `step:${stepName}#1`, attempt);
    return { n: Number(n), pid: process.pid };
  }
}

/**
 * Two counted steps (in `stepCountKey`), with a pause where the input says: between them
 * ('middle') or after both ('end'). A zombie test stops the process at the pause, lets another
 * worker finish the run, then lets the stopped one carry on with a lease it no longer holds.
 */
@Workflow('chaos.zombie')
export class ZombieWorkflow {
  constructor(
    @Inject(CHAOS_REDIS) private readonly redis: Redis,
    @Inject(CHAOS_NS) private readonly ns: string,
    @Inject(CHAOS_HOOKS) private readonly hooks: ChaosHooks,
  ) {}

  async run(
    input: { pauseAt: 'middle' | 'end' },
    ctx: RunContext,
  ): Promise<{ first: string; second: string; attempt: number; by: number }> {
    const first = await this.first(ctx.runId);
    if (input.pauseAt === 'middle') await this.hooks.pause?.(ctx.runId, 'middle');
    let second: string;
    try {
      second = await this.second(ctx.runId);
    } catch (error) {
      this.hooks.stepFailed?.(ctx.runId, 'second', error);
      throw error;
    }
    if (input.pauseAt === 'end') await this.hooks.pause?.(ctx.runId, 'end');
    return { first, second, attempt: ctx.attempt, by: process.pid };
  }

  @Step()
  async first(runId: string): Promise<string> {
    await this.redis.hincrby(stepCountKey(this.ns), `${runId}:first`, 1);
    return `first by pid ${process.pid}`;
  }

  @Step()
  async second(runId: string): Promise<string> {
    await this.redis.hincrby(stepCountKey(this.ns), `${runId}:second`, 1);
    return `second by pid ${process.pid}`;
  }
}

/** `{sluice:<ns>}:cron-exec` — runId → executions of CronTickWorkflow (and the pids, `<runId>:pid`). */
export const cronExecKey = (ns: string) => `{sluice:${ns}}:cron-exec`;
export const CRON_SCHEDULE_ID = 'chaos.every-second';

/** Fired every second by a schedule every worker process declares; counts its executions. */
@Workflow('chaos.cron-tick', { schedules: [{ id: CRON_SCHEDULE_ID, cron: '* * * * * *' }] })
export class CronTickWorkflow {
  constructor(
    @Inject(CHAOS_REDIS) private readonly redis: Redis,
    @Inject(CHAOS_NS) private readonly ns: string,
  ) {}

  async run(_input: unknown, ctx: RunContext): Promise<number> {
    await this.redis.hset(cronExecKey(this.ns), `${ctx.runId}:pid`, process.pid);
    return this.redis.hincrby(cronExecKey(this.ns), ctx.runId, 1);
  }
}

/** Holds its slot until the host releases it (the cron test saturates every worker with these). */
@Workflow('chaos.slot-holder')
export class SlotHolderWorkflow {
  constructor(@Inject(CHAOS_HOOKS) private readonly hooks: ChaosHooks) {}

  async run(_input: unknown, ctx: RunContext): Promise<string> {
    await this.hooks.beforeWork?.(ctx.runId);
    return 'released';
  }
}
