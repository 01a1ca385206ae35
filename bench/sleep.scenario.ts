/**
 * sleep-between-steps, Sluice's side (BullMQ and the floor have no equivalent: see their
 * `noEquivalent`). N runs, each: a step, `ctx.sleep('pause', 1 s)`, a step. A sleeping run holds
 * no slot, lease or worker memory of its own, so N runs need about the 1 s plus the time to do
 * their work, at any N and worker concurrency.
 *
 * Timed: from the first enqueue (the worker is up and idle, warmed by one run) to the N-th
 * completion, so ops/s (N / that time) includes the enqueues and the 1 s sleep. Why the sleep is
 * not simply subtracted: the worker puts the first runs to sleep while later ones are still being
 * enqueued and started, and once it takes longer than 1 s to put all N to sleep (20,000 runs at
 * concurrency 50 do, here) the first runs wake while it is still busy: their sleep overlaps work,
 * and subtracting a flat 1 s would credit Sluice with time it spent working. What is subtracted
 * instead, for `runsPerSecExclIdle`, is the time the worker actually had nothing to do: from the
 * N-th run going to sleep to the first run waking (0 if they overlap), measured by RunEvents.
 *
 * Then, untimed (the probe): the same N runs again with a 10-minute sleep, so that all N are
 * asleep at once (checked: N in the sleeping index); Redis `used_memory` before the enqueue and
 * with all asleep gives the memory per sleeping run (its record, memo of the first step, and its
 * entries in the sleeping and delayed indexes), plus MEMORY USAGE of one sleeping run's hash.
 */
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { QueueClient, RunContext, RunEvents, Step, Workflow } from '../lib';
import { deferred, Details, PreparedRun, withTimeout } from './bench.types';
import { benchModule, countRuns, NAMESPACE, start } from './sluice.system';

/** The sleep of the timed part. */
export const SLEEP_MS = 1_000;
/** The probe's sleep: long enough that no run wakes while the probe measures. */
const PROBE_SLEEP_MS = 600_000;
const CONCURRENCY = 50;
const WORKFLOW = 'bench.sleep-steps';

@Workflow(WORKFLOW)
export class SleepStepsWorkflow {
  async run(input: { n: number; sleepMs: number }, ctx: RunContext): Promise<string> {
    const a = await this.one(input.n);
    await ctx.sleep('pause', input.sleepMs);
    return this.two(a);
  }
  @Step() async one(n: number) {
    return n + 1;
  }
  @Step() async two(n: number) {
    return `ok-${n}`;
  }
}

/** When the worker's runs went to sleep, woke and completed (RunEvents fire after the commit), for one batch of `target` runs. */
@Injectable()
export class SleepTimeline {
  target = 0;
  private suspended = 0;
  private completed = 0;
  allAsleepAt = 0;
  firstWakeAt = 0;
  lastCompletedAt = 0;
  asleep = deferred();
  done = deferred();

  constructor(events: RunEvents) {
    events.on('suspended', () => {
      if (++this.suspended !== this.target) return;
      this.allAsleepAt = performance.now();
      this.asleep.resolve();
    });
    // An attempt after the first is a run resumed after its sleep (nothing here fails or retries).
    events.on('active', (event) => void (event.attempt > 1 && !this.firstWakeAt && (this.firstWakeAt = performance.now())));
    events.on('completed', () => {
      if (++this.completed !== this.target) return;
      this.lastCompletedAt = performance.now();
      this.done.resolve();
    });
  }

  /** Starts counting a new batch of `target` runs. */
  reset(target: number): void {
    Object.assign(this, {
      target,
      suspended: 0,
      completed: 0,
      allAsleepAt: 0,
      firstWakeAt: 0,
      lastCompletedAt: 0,
      asleep: deferred(),
      done: deferred(),
    });
  }
}

type App = Awaited<ReturnType<typeof start>>;

async function startWorker(url: string): Promise<{ app: App; client: QueueClient; timeline: SleepTimeline }> {
  const app = await start(
    benchModule({ url }, NAMESPACE, [SleepStepsWorkflow], { enabled: true, concurrency: CONCURRENCY }, 0, [SleepTimeline]),
  );
  const client = app.get(QueueClient);
  const timeline = app.get(SleepTimeline);
  // Warm-up (untimed): one run through every script of the path, sleep included (1 ms: it suspends and wakes).
  timeline.reset(1);
  await client.enqueue(SleepStepsWorkflow, { n: -1, sleepMs: 1 });
  await withTimeout(timeline.done.promise, 'sleep-between-steps warm-up', 30_000);
  return { app, client, timeline };
}

async function enqueueAll(client: QueueClient, jobs: number, sleepMs: number): Promise<void> {
  for (let i = 0; i < jobs; i += 1_000) {
    const items = Array.from({ length: Math.min(1_000, jobs - i) }, (_, k) => ({ input: { n: i + k, sleepMs } }));
    await client.enqueueMany(SleepStepsWorkflow, items);
  }
}

const usedMemory = async (redis: Redis) => Number(/^used_memory:(\d+)/m.exec(await redis.info('memory'))![1]);

export async function prepareSleepBetweenSteps(jobs: number, url: string): Promise<PreparedRun> {
  let worker: Awaited<ReturnType<typeof startWorker>> | undefined = await startWorker(url);
  let probeApp: App | undefined;
  const { client, timeline } = worker;
  timeline.reset(jobs);
  return {
    note: `sluice: ops/s from the first enqueue to the last completion, the ${SLEEP_MS / 1000} s sleep included; concurrency ${CONCURRENCY}`,
    timed: async () => {
      const t0 = performance.now();
      await enqueueAll(client, jobs, SLEEP_MS);
      const enqueuedAt = performance.now();
      await timeline.done.promise;
      const idleMs = Math.max(0, timeline.firstWakeAt - timeline.allAsleepAt);
      const totalMs = timeline.lastCompletedAt - t0;
      const details: Details = {
        sleepMs: SLEEP_MS,
        enqueueMs: enqueuedAt - t0,
        allAsleepMs: timeline.allAsleepAt - t0,
        firstWakeMs: timeline.firstWakeAt - t0,
        lastWakeToDoneMs: timeline.lastCompletedAt - (timeline.allAsleepAt + SLEEP_MS),
        totalMs,
        idleMs,
        runsPerSec: (jobs * 1000) / totalMs,
        runsPerSecExclIdle: (jobs * 1000) / (totalMs - idleMs),
      };
      return { details };
    },
    committed: async () => (await countRuns(url, 'completed')) - 1,
    probe: async () => {
      // A fresh namespace state and worker: the timed part's runs go, its worker stops.
      await worker!.app.close();
      worker = undefined;
      const admin = new Redis(url);
      try {
        await admin.flushall();
        const probe = await startWorker(url);
        probeApp = probe.app;
        const before = await usedMemory(admin);
        probe.timeline.reset(jobs);
        await enqueueAll(probe.client, jobs, PROBE_SLEEP_MS);
        await withTimeout(probe.timeline.asleep.promise, 'sleep-between-steps memory probe');
        const sleepingKey = `{sluice:${NAMESPACE}}:wf:${WORKFLOW}:sleeping`;
        const asleep = await admin.zcard(sleepingKey);
        if (asleep !== jobs) throw new Error(`memory probe: ${asleep} of ${jobs} runs asleep`);
        const after = await usedMemory(admin);
        const [oneId] = await admin.zrange(sleepingKey, 0, 0);
        const hashBytes = Number(await admin.memory('USAGE', `{sluice:${NAMESPACE}}:run:${oneId}`, 'SAMPLES', 0));
        return { probeAsleep: asleep, redisBytesPerSleepingRun: (after - before) / jobs, sleepingRunHashBytes: hashBytes };
      } finally {
        await admin.quit();
      }
    },
    cleanup: async () => {
      await worker?.app.close();
      await probeApp?.close();
    },
  };
}
