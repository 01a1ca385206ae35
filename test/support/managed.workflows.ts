import 'reflect-metadata';
import { RunCancelledError, RunContext, Workflow } from '../../lib';
import { Counter, Gates } from './workflows';

/**
 * The workload test/e2e/managed-limits.spec.ts runs on each Redis of its matrix: one workflow
 * per feature. State the test awaits is keyed by run id (each cell has its own namespace).
 */

/** Runs of Hold that started, and those whose `ctx.signal` aborted with RunCancelledError. */
export const holding = new Gates();
export const cancelHeard = new Gates();
/** Schedule fires of Tick, by the key of the schedule's input. */
export const ticked = new Gates();
/** How many times each step function ran, by `<run id>:<step>`. */
export const executions = new Counter();

/** Three steps; a cap, so that every worker boot writes declarations. */
@Workflow('managed.order', { concurrency: 50 })
export class Order {
  async run(input: { n: number }, ctx: RunContext): Promise<string> {
    const one = await ctx.step('one', () => input.n + 1);
    const two = await ctx.step('two', () => one * 2);
    return ctx.step('three', () => `${two}!`);
  }
}

/** A step that fails its first try (retried in place), then an attempt that fails (the run is retried and replays the step). */
@Workflow('managed.flaky', { attempts: 2, backoff: { delayMs: 20 } })
export class Flaky {
  async run(_input: unknown, ctx: RunContext): Promise<{ tries: number; attempt: number }> {
    const tries = await ctx.step(
      'flaky',
      ({ attempt }) => {
        executions.inc(`${ctx.runId}:flaky`);
        if (attempt === 1) throw new Error('the first try fails');
        return attempt;
      },
      { attempts: 3, backoff: { delayMs: 10 } },
    );
    if (ctx.attempt === 1) throw new Error('the first attempt fails');
    return { tries, attempt: ctx.attempt };
  }
}

/** A durable wait: the run suspends, holding no slot, until its signal comes. */
@Workflow('managed.approval', { attempts: 1 })
export class Approval {
  async run(_input: unknown, ctx: RunContext): Promise<boolean | 'timed out'> {
    const answer = await ctx.waitForSignal<{ ok: boolean }>('approve', { timeoutMs: 30_000 });
    return answer.timedOut ? 'timed out' : answer.payload.ok;
  }
}

@Workflow('managed.child', { attempts: 1 })
export class Child {
  async run(input: { n: number }, _ctx: RunContext): Promise<number> {
    return input.n * 3;
  }
}

@Workflow('managed.parent', { attempts: 1 })
export class Parent {
  async run(input: { n: number }, ctx: RunContext): Promise<{ child: number }> {
    return { child: await ctx.invoke(Child, { n: input.n }) };
  }
}

/** Holds its slot until cancelled: the worker hears the cancel over its subscriber connection. */
@Workflow('managed.hold', { attempts: 1 })
export class Hold {
  async run(_input: unknown, ctx: RunContext): Promise<string> {
    holding.open(ctx.runId);
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    if (ctx.signal.reason instanceof RunCancelledError) cancelHeard.open(ctx.runId);
    return 'aborted';
  }
}

/** Started by a cron schedule the test sets at runtime. */
@Workflow('managed.tick', { attempts: 1 })
export class Tick {
  async run(input: { key: string }, _ctx: RunContext): Promise<string> {
    ticked.open(input.key);
    return input.key;
  }
}

export const MANAGED_WORKFLOWS = [Order, Flaky, Approval, Child, Parent, Hold, Tick];
