import { Job, Queue, QueueEvents, Worker } from 'bullmq';
import { randomUUID } from 'node:crypto';
import {
  BenchSystem,
  completionCounter,
  inBatches,
  inParallel,
  isRoundtrip,
  PreparedRun,
  ScenarioName,
  timeFirstClaims,
  timeRoundTrips,
  warmUpRoundTrips,
} from './bench.types';

/** BullMQ as its docs set it up: one Queue per queue name, Worker with `concurrency`, QueueEvents for waiting. */
export class BullmqSystem implements BenchSystem {
  readonly name = 'bullmq';

  /**
   * BullMQ has no durable sleep inside a job: a job holds its worker slot until its processor
   * returns. Re-adding a delayed job or a hand-written step machine (moveToDelayed + a step
   * field in job data) would be an emulation of ours, not BullMQ as its docs set it up.
   */
  noEquivalent(scenario: ScenarioName): string | undefined {
    return scenario === 'sleep-between-steps' ? 'bullmq: no equivalent (no durable sleep inside a job; not emulated)' : undefined;
  }

  async prepare(scenario: ScenarioName, jobs: number, url: string): Promise<PreparedRun> {
    const { hostname, port } = new URL(url);
    const connection = { host: hostname, port: Number(port), maxRetriesPerRequest: null };
    const run = randomUUID().slice(0, 8);
    const queueCount = scenario === 'drain-c50-10groups' ? 10 : 1;
    const queues = Array.from({ length: queueCount }, (_, q) => new Queue(`bench-${run}-${q}`, { connection }));
    const closers: Array<() => Promise<unknown>> = [() => Promise.all(queues.map((q) => q.close()))];
    const cleanup = async () => {
      for (const close of closers.reverse()) await close();
    };
    const completedCount = async () => (await Promise.all(queues.map((q) => q.getCompletedCount()))).reduce((a, b) => a + b, 0);
    const queued = async () => (await Promise.all(queues.map((q) => q.count()))).reduce((a, b) => a + b, 0);

    if (scenario === 'enqueue-seq' || scenario === 'enqueue-c50') {
      const inFlight = scenario === 'enqueue-c50' ? 50 : 1;
      return { cleanup, committed: queued, timed: async () => (await inParallel(jobs, inFlight, (i) => queues[0].add('echo', i)), {}) };
    }
    if (scenario === 'enqueue-batch') {
      return {
        cleanup,
        committed: queued,
        timed: async () => (
          await inBatches(jobs, (from, count) =>
            queues[0].addBulk(Array.from({ length: count }, (_, k) => ({ name: 'echo', data: from + k }))),
          ),
          {}
        ),
      };
    }

    if (scenario === 'first-claim') {
      const events = new QueueEvents(queues[0].name, { connection });
      closers.push(() => events.close());
      await events.waitUntilReady();
      return {
        cleanup,
        committed: completedCount,
        timed: () =>
          timeFirstClaims(
            jobs,
            (i) => queues[0].add('echo', i),
            async (job) => {
              const worker = new Worker(queues[0].name, async (j: Job) => `ok-${j.data}`, { connection });
              await job.waitUntilFinished(events);
              return () => worker.close();
            },
          ),
      };
    }
    if (isRoundtrip(scenario)) {
      const events = new QueueEvents(queues[0].name, { connection });
      const worker = new Worker(queues[0].name, async (job: Job) => `ok-${job.data}`, { connection });
      closers.push(
        () => worker.close(),
        () => events.close(),
      );
      await Promise.all([events.waitUntilReady(), worker.waitUntilReady()]);
      const once = async (i: number) => (await queues[0].add('echo', i)).waitUntilFinished(events);
      const warm = await warmUpRoundTrips(once);
      return {
        cleanup,
        committed: async () => (await completedCount()) - warm,
        timed: () => timeRoundTrips(jobs, once),
      };
    }

    // Drains: pre-fill (untimed), then time worker start → N completions (the 'completed' event fires after moveToFinished commits).
    let chunks = 0;
    await inBatches(jobs, (from, count) =>
      queues[chunks++ % queueCount].addBulk(Array.from({ length: count }, (_, k) => ({ name: 'echo', data: from + k }))),
    );
    const steps = scenario === 'drain-c50-3steps';
    const processor = async (job: Job) => {
      if (steps) {
        let n = job.data as number;
        for (const step of ['one', 'two', 'three']) await job.updateData({ n: ++n, step });
      }
      return `ok-${job.data}`;
    };
    const concurrency = scenario === 'drain-c1' ? 1 : queueCount > 1 ? 5 : 50;
    return {
      note: steps
        ? 'bullmq: each step persisted with job.updateData'
        : queueCount > 1
          ? 'bullmq: no group caps in open source; 10 queues x worker concurrency 5 (per process, not fleet-wide)'
          : undefined,
      cleanup,
      committed: completedCount,
      timed: async () => {
        const finished = completionCounter(jobs);
        const workers = queues.map((q) => new Worker(q.name, processor, { connection, concurrency }));
        closers.push(() => Promise.all(workers.map((w) => w.close())));
        workers.forEach((w) => w.on('completed', finished.tick));
        await finished.all;
        return {};
      },
    };
  }
}
