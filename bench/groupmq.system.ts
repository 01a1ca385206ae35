import { Queue, Worker } from 'groupmq';
import IORedis from 'ioredis';
import { randomUUID } from 'node:crypto';
import {
  BenchSystem,
  completionCounter,
  inParallel,
  isRoundtrip,
  PreparedRun,
  ScenarioName,
  timeFirstClaims,
  timeRoundTrips,
  warmUpRoundTrips,
  ROUNDTRIP_WARMUP_RUNS,
} from './bench.types';

/** Groups the drains spread their jobs over: groupmq runs one job per group at a time, so a drain at 50 needs at least 50. */
const DRAIN_GROUPS = 100;

/**
 * groupmq 1.1 (per-group FIFO, one active job per group) as its README sets it up: a Queue on an
 * ioredis client, a Worker with `concurrency`, `worker.on('completed')`. `keepCompleted` is set
 * to keep every job (its default keeps none) so the correctness check can count them; add
 * batching stays off (its docs: jobs in a batch window are lost in a crash).
 */
export class GroupmqSystem implements BenchSystem {
  readonly name = 'groupmq';

  noEquivalent(scenario: ScenarioName): string | undefined {
    if (scenario === 'sleep-between-steps') return 'groupmq: no equivalent (no durable sleep inside a job; not emulated)';
    // Its add batching is a client-side buffer flushed on a timer, which its docs advise against for durable jobs.
    if (scenario === 'enqueue-batch') return 'groupmq: no equivalent (no bulk add; not emulated)';
    return undefined;
  }

  async prepare(scenario: ScenarioName, jobs: number, url: string): Promise<PreparedRun> {
    const redis = new IORedis(url, { maxRetriesPerRequest: null });
    const queue = new Queue<number | { n: number; step: string }>({
      redis,
      namespace: `bench-${randomUUID().slice(0, 8)}`,
      keepCompleted: jobs + ROUNDTRIP_WARMUP_RUNS + 10, // the round trips' warm-up too
    });
    const workers: Worker<number | { n: number; step: string }>[] = [];
    const cleanup = async () => {
      await Promise.all(workers.map((worker) => worker.close(5_000).catch(() => undefined)));
      await queue.close().catch(() => undefined);
      redis.disconnect();
    };
    const groups = scenario === 'drain-c50-10groups' ? 10 : DRAIN_GROUPS;
    const add = (i: number) => queue.add({ groupId: `g${i % groups}`, data: i });

    if (scenario === 'enqueue-seq' || scenario === 'enqueue-c50') {
      const inFlight = scenario === 'enqueue-c50' ? 50 : 1;
      return {
        cleanup,
        committed: async () => (await queue.getJobCounts()).waiting,
        timed: async () => (await inParallel(jobs, inFlight, add), {}),
      };
    }

    const start = (concurrency: number, handler: (job: { id: string; data: unknown }) => Promise<unknown>) => {
      const worker = new Worker({ queue, concurrency, handler });
      workers.push(worker);
      void worker.run();
      return worker;
    };

    if (scenario === 'first-claim') {
      return {
        cleanup,
        committed: () => queue.getCompletedCount(),
        timed: () =>
          timeFirstClaims(jobs, add, async (job) => {
            const worker = new Worker({ queue, concurrency: 1, handler: async (j) => `ok-${JSON.stringify(j.data)}` });
            const done = new Promise<void>((resolve) =>
              worker.on('completed', (finished: { id: string }) => finished.id === job.id && resolve()),
            );
            void worker.run();
            await done;
            return () => worker.close(5_000);
          }),
      };
    }
    if (isRoundtrip(scenario)) {
      const waiting = new Map<string, () => void>();
      const worker = start(1, async (job) => `ok-${String(job.data)}`);
      worker.on('completed', (job: { id: string }) => waiting.get(job.id)?.());
      const once = async (i: number) => {
        let done!: () => void;
        const finished = new Promise<void>((resolve) => (done = resolve));
        const job = await add(i);
        waiting.set(job.id, done);
        // It may have finished before the listener was set: groupmq has no waitUntilFinished to close that gap.
        if ((await queue.getJob(job.id))?.status === 'completed') done();
        await finished;
        waiting.delete(job.id);
      };
      const warm = await warmUpRoundTrips(once);
      return {
        // With its default atomicCompletion, a worker that finds no next job in the group sleeps a
        // random 0-100 ms one time in ten (groupmq 1.1.0, dist/index.js): ~5 ms a round trip on average.
        note: "groupmq: completion awaited through the worker's in-process completed event (it has no QueueEvents); its default atomicCompletion sleeps 0-100 ms 1 time in 10 after a job with no successor",
        cleanup,
        committed: async () => (await queue.getCompletedCount()) - warm,
        timed: () => timeRoundTrips(jobs, once),
      };
    }

    // Drains: pre-fill (untimed), then time worker start → N completions.
    await inParallel(jobs, 50, add);
    const steps = scenario === 'drain-c50-3steps';
    const handler = async (job: { id: string; data: unknown }) => {
      if (steps) {
        let n = job.data as number;
        for (const step of ['one', 'two', 'three']) await queue.updateData(job.id, { n: ++n, step });
      }
      return `ok-${String(job.data)}`;
    };
    const concurrency = scenario === 'drain-c1' ? 1 : 50;
    return {
      note: steps
        ? 'groupmq: each step persisted with queue.updateData'
        : scenario === 'drain-c50-10groups'
          ? 'groupmq: one active job per group, not 5: 10 groups run at most 10 jobs at once'
          : `groupmq: jobs spread over ${DRAIN_GROUPS} groups (one active job per group)`,
      cleanup,
      committed: () => queue.getCompletedCount(),
      timed: async () => {
        const finished = completionCounter(jobs);
        start(concurrency, handler).on('completed', finished.tick);
        await finished.all;
        return {};
      },
    };
  }
}
