import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { QueueModule, RunContext, Workflow } from '../../lib';
import {
  DW_CHILD,
  DW_EVENT,
  DW_PARENT,
  DW_SLEEPER,
  DW_WAITER,
  type ChildInput,
  type ParentInput,
  type ParentResult,
  type SleeperInput,
  type SleeperResult,
  type WaiterInput,
  type WaiterResult,
} from './durable-waits.workflows';

/**
 * A Sluice worker in its own OS process for test/chaos/durable-waits.spec.ts (forked through
 * ChildWorker). Its workflows (durable-waits.workflows.ts) do a step, a durable wait (a sleep, an
 * event, child workflows that sleep), a step; every step execution appends one
 * line `<run id> <step> <pid>` to this process's own file under FX_DIR, with a synchronous write:
 * once the step returns, its line is in the kernel's page cache, so it survives a SIGKILL of this
 * process and any fault of Redis. The test counts the lines.
 *
 * env: REDIS_URL, NS, FX_DIR, CONCURRENCY, LOCK_MS, STALLED_INTERVAL_MS, REDIS_TIMEOUT_MS.
 * IPC out: { ready: true } once the app is initialised (its workers run); { stopped: true } before
 * exiting 0 on 'stop'. IPC in: 'stop' closes the app and exits 0.
 */
const url = required('REDIS_URL');
const ns = required('NS');
const effects = join(required('FX_DIR'), `fx-${process.pid}.log`);

/** The side effect of a step: one line, written before the step returns. */
function effect(runId: string, step: string): number {
  appendFileSync(effects, `${runId} ${step} ${process.pid}\n`);
  return process.pid;
}

@Workflow(DW_SLEEPER, { attempts: 3 })
class Sleeper {
  async run(input: SleeperInput, ctx: RunContext): Promise<SleeperResult> {
    const before = await ctx.step('before', () => effect(ctx.runId, 'before'));
    await ctx.sleep('nap', input.ms);
    const after = await ctx.step('after', () => effect(ctx.runId, 'after'));
    return { i: input.i, before, after, attempt: ctx.attempt, by: process.pid };
  }
}

@Workflow(DW_WAITER, { attempts: 3 })
class Waiter {
  async run(input: WaiterInput, ctx: RunContext): Promise<WaiterResult> {
    const before = await ctx.step('before', () => effect(ctx.runId, 'before'));
    const got = await ctx.waitForEvent<{ key: string }>(
      DW_EVENT,
      input.timeout ? { key: input.key, timeoutMs: '10m' } : { key: input.key },
    );
    const after = await ctx.step('after', () => effect(ctx.runId, 'after'));
    return { i: input.i, key: got.timedOut ? null : got.payload.key, before, after, attempt: ctx.attempt, by: process.pid };
  }
}

@Workflow(DW_PARENT, { attempts: 3 })
class Parent {
  async run(input: ParentInput, ctx: RunContext): Promise<ParentResult> {
    const before = await ctx.step('before', () => effect(ctx.runId, 'before'));
    const results = await ctx.invokeAll<number>(
      Array.from({ length: input.children }, (_, k) => ({ workflow: DW_CHILD, input: { k, ms: input.ms } satisfies ChildInput })),
    );
    const after = await ctx.step('after', () => effect(ctx.runId, 'after'));
    return { i: input.i, results, before, after, attempt: ctx.attempt, by: process.pid };
  }
}

/** A child of Parent: a step, a sleep (none for the first child: it finishes at once); its result is 2k. */
@Workflow(DW_CHILD, { attempts: 3 })
class Child {
  async run(input: ChildInput, ctx: RunContext): Promise<number> {
    await ctx.step('work', () => effect(ctx.runId, 'work'));
    if (input.k > 0) await ctx.sleep('nap', input.ms);
    return input.k * 2;
  }
}

async function main(): Promise<void> {
  @Module({
    imports: [
      QueueModule.forRoot({
        connection: { url },
        namespace: ns,
        worker: {
          concurrency: Number(process.env.CONCURRENCY ?? 50),
          ...(process.env.LOCK_MS && { lockMs: Number(process.env.LOCK_MS) }),
          ...(process.env.STALLED_INTERVAL_MS && { stalledIntervalMs: Number(process.env.STALLED_INTERVAL_MS) }),
        },
        ...(process.env.REDIS_TIMEOUT_MS && { redisTimeoutMs: Number(process.env.REDIS_TIMEOUT_MS) }),
      }),
    ],
    providers: [Sleeper, Waiter, Parent, Child],
  })
  class ChildModule {}

  const app = await NestFactory.createApplicationContext(ChildModule, {
    logger: process.env.SLUICE_TEST_LOGS ? ['log', 'warn', 'error'] : ['error'],
  });
  process.on('message', (message) => {
    if (message !== 'stop') return;
    void app.close().then(
      () => process.send!({ stopped: true }, () => process.exit(0)),
      (error: Error) => {
        console.error(`worker ${process.pid} failed to stop: ${error.stack}`);
        process.exit(1);
      },
    );
  });
  // The test process went away: do not linger as an orphan.
  process.on('disconnect', () => process.exit(2));
  process.send?.({ ready: true });
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`durable-waits.process: ${name} is not set`);
  return value;
}

main().catch((error: Error) => {
  console.error(`worker ${process.pid} failed: ${error.stack}`);
  process.exit(1);
});
