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
