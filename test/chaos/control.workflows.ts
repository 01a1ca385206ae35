import 'reflect-metadata';
import { Inject } from '@nestjs/common';
import type Redis from 'ioredis';
import { RunContext, Workflow } from '../../lib';
import { CHAOS_HOOKS, CHAOS_NS, CHAOS_REDIS, ChaosHooks } from './chaos.workflows';

/**
 * Workflows of the run-control fault tests (test/chaos/run-control.spec.ts), run by forked worker
 * processes in MODE 'control'. Starts are recorded in Redis (`startsKey`), so the test counts them
 * across processes.
 */
export const startsKey = (ns: string) => `{sluice:${ns}}:starts`;

/** Holds its slot (cap 1) until its signal aborts, then reports the abort (hook `aborted`) and ends. */
@Workflow('ctl.hold', { concurrency: 1, attempts: 1 })
export class HoldWorkflow {
  constructor(
    @Inject(CHAOS_HOOKS)
    private readonly hooks: ChaosHooks & { started?(runId: string): void; aborted?(runId: string, reason: unknown): void },
  ) {}

  async run(_input: unknown, ctx: RunContext): Promise<string> {
    this.hooks.started?.(ctx.runId);
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    this.hooks.aborted?.(ctx.runId, ctx.signal.reason);
    throw ctx.signal.reason;
  }
}

abstract class Recording {
  constructor(
    @Inject(CHAOS_REDIS) private readonly redis: Redis,
    @Inject(CHAOS_NS) private readonly ns: string,
  ) {}

  async run(input: { key: string }): Promise<string> {
    await this.redis.rpush(startsKey(this.ns), input.key);
    return input.key;
  }
}

@Workflow('ctl.paused')
export class PausedWorkflow extends Recording {}
@Workflow('ctl.other')
export class OtherWorkflow extends Recording {}
@Workflow('ctl.rated', { rateLimit: { max: 50, perMs: 1000 } })
export class RatedWorkflow extends Recording {}

export const CONTROL_WORKFLOWS = [HoldWorkflow, PausedWorkflow, OtherWorkflow, RatedWorkflow];
