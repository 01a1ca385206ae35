import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { QueueModule, RunContext, RunEvents, Workflow } from '../../lib';

/**
 * The worker process of test/chaos/waits-scale.spec.ts, forked through ChildWorker: one Nest app,
 * one Sluice worker at CONCURRENCY, running WaitsScaleWorkflow (step → ctx.sleep → step).
 *
 * env: REDIS_URL, NS, RUNS (the inputs are 0 … RUNS-1), SLEEP_MS, CONCURRENCY. Run it with
 * NODE_OPTIONS=--expose-gc for heap figures after a full GC (it reports whether it could).
 * Side effects are counted here, in typed arrays indexed by the run's input (20 KB for 10,000
 * runs), not in Redis, so the test's Redis memory figures hold only the runs' own keys.
 *
 * IPC out: { ready: true }; { allSuspended: <epoch ms>, memory, gc } / { allCompleted: <epoch ms> }
 * when the RUNS-th 'suspended' / 'completed' event fired (after its commit; memory: as below, at
 * that moment); { failedRun, error } for a failed attempt; { memory: process.memoryUsage(),
 * gc, tag } answering 'memory:<tag>'; { stopped: true, before, after, started, completed, suspended,
 * maxExecuting } on 'stop' (before / after: executions of each step per input, started: attempts
 * that entered run(), maxExecuting: the most attempts executing workflow code at once).
 */
const url = required('REDIS_URL');
const ns = required('NS');
const runs = Number(required('RUNS'));
const sleepMs = Number(required('SLEEP_MS'));
const concurrency = Number(required('CONCURRENCY'));
const send = (message: object) => process.send?.(message);

const before = new Uint16Array(runs);
const after = new Uint16Array(runs);
const started = new Uint16Array(runs);
let completed = 0;
let suspended = 0;
let executing = 0;
let maxExecuting = 0;

const gc = (globalThis as { gc?: () => void }).gc;

/** process.memoryUsage() after a full GC when --expose-gc is on (two passes: the first can leave finalizable garbage for the second). */
function memoryNow(): NodeJS.MemoryUsage {
  gc?.();
  gc?.();
  return process.memoryUsage();
}

@Workflow('waits-scale.sleeper')
class WaitsScaleWorkflow {
  async run(input: { i: number }, ctx: RunContext): Promise<{ i: number }> {
    started[input.i]++;
    // Attempts executing code here (from run()'s start to the sleep, and from the replay's start
    // to the return): each holds a slot, which it gives up only later, when its sleep or its
    // result is committed. So this can never exceed the worker's concurrency.
    maxExecuting = Math.max(maxExecuting, ++executing);
    await ctx.step('before', () => ++before[input.i]);
    executing--;
    await ctx.sleep('pause', sleepMs);
    maxExecuting = Math.max(maxExecuting, ++executing);
    await ctx.step('after', () => ++after[input.i]);
    executing--;
    return { i: input.i };
  }
}

@Injectable()
class CompletionCounter {
  constructor(events: RunEvents) {
    events.on('suspended', () => {
      if (++suspended === runs) {
        // The moment the last run went to sleep: the memory while all sleep, taken here and now
        // (its GC pause, some tens of ms, is part of the wake-to-completion time).
        const at = Date.now();
        send({ allSuspended: at, memory: memoryNow(), gc: gc !== undefined });
      }
    });
    events.on('completed', () => {
      if (++completed === runs) send({ allCompleted: Date.now() });
    });
    events.on('failed', (event) => send({ failedRun: event.runId, error: `${event.error.name}: ${event.error.message}` }));
  }
}

async function main(): Promise<void> {
  @Module({
    imports: [QueueModule.forRoot({ connection: { url }, namespace: ns, worker: { concurrency } })],
    providers: [WaitsScaleWorkflow, CompletionCounter],
  })
  class WaitsScaleModule {}

  const app = await NestFactory.createApplicationContext(WaitsScaleModule, {
    logger: process.env.SLUICE_TEST_LOGS ? ['log', 'warn', 'error'] : ['error'],
  });
  process.on('message', (message) => {
    if (typeof message === 'string' && message.startsWith('memory:')) {
      send({ memory: memoryNow(), gc: gc !== undefined, tag: message.slice('memory:'.length) });
    }
    if (message === 'stop') {
      void app.close().then(
        () =>
          process.send!(
            { stopped: true, before: [...before], after: [...after], started: [...started], completed, suspended, maxExecuting },
            () => process.exit(0),
          ),
        (error: Error) => {
          console.error(`waits-scale worker ${process.pid} failed to stop: ${error.stack}`);
          process.exit(1);
        },
      );
    }
  });
  process.on('disconnect', () => process.exit(2));
  send({ ready: true });
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`waits-scale.process: ${name} is not set`);
  return value;
}

main().catch((error: Error) => {
  console.error(`waits-scale worker ${process.pid} failed: ${error.stack}`);
  process.exit(1);
});
