import BeeQueue from 'bee-queue';
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

/**
 * bee-queue 2 as its README sets it up: producer queues with `isWorker: false` (and
 * `getEvents: false` where no job events are awaited), worker queues with `process(concurrency)`,
 * `saveAll` for bulk saves, `job.on('succeeded')` to await a result. Jobs are kept after success
 * (its default), as BullMQ's and Sluice's are, so the correctness check can count them.
 */
export class BeeQueueSystem implements BenchSystem {
  readonly name = 'beequeue';

  noEquivalent(scenario: ScenarioName): string | undefined {
    if (scenario === 'drain-c50-3steps') return 'beequeue: no equivalent (a job has no persisted steps or data updates; not emulated)';
    if (scenario === 'sleep-between-steps') return 'beequeue: no equivalent (no durable sleep inside a job; not emulated)';
    return undefined;
  }

  async prepare(scenario: ScenarioName, jobs: number, url: string): Promise<PreparedRun> {
    const { hostname, port } = new URL(url);
    const redis = { host: hostname, port: Number(port) };
    const run = randomUUID().slice(0, 8);
    const queueCount = scenario === 'drain-c50-10groups' ? 10 : 1;
    const names = Array.from({ length: queueCount }, (_, q) => `bench-${run}-${q}`);
    const queues: BeeQueue[] = [];
    const open = (name: string, settings: BeeQueue.QueueSettings) => {
      const queue = new BeeQueue(name, { redis, ...settings });
      queues.push(queue);
      return queue;
    };
    const cleanup = async () => {
      await Promise.all(queues.map((queue) => queue.close(5_000).catch(() => undefined)));
    };
    const health = async (state: 'waiting' | 'succeeded') => {
      const counts = await Promise.all(names.map((name) => open(name, { isWorker: false, getEvents: false }).checkHealth()));
      return counts.reduce((sum, count) => sum + count[state], 0);
    };

    if (scenario === 'enqueue-seq' || scenario === 'enqueue-c50') {
      const producer = open(names[0], { isWorker: false, getEvents: false });
      await producer.ready();
      const inFlight = scenario === 'enqueue-c50' ? 50 : 1;
      return {
        cleanup,
        committed: () => health('waiting'),
        timed: async () => (await inParallel(jobs, inFlight, (i) => producer.createJob(i).save()), {}),
      };
    }
    if (scenario === 'enqueue-batch') {
      const producer = open(names[0], { isWorker: false, getEvents: false });
      await producer.ready();
      return {
        cleanup,
        committed: () => health('waiting'),
        timed: async () => (
          await inBatches(jobs, (from, count) => producer.saveAll(Array.from({ length: count }, (_, k) => producer.createJob(from + k)))),
          {}
        ),
      };
    }

    if (scenario === 'first-claim') {
      const producer = open(names[0], { isWorker: false });
      await producer.ready();
      return {
        cleanup,
        committed: () => health('succeeded'),
        timed: () =>
          timeFirstClaims(
            jobs,
            async (i) => {
              const job = producer.createJob(i);
              const done = new Promise((resolve, reject) => {
                job.on('succeeded', resolve);
                job.on('failed', reject);
              });
              await job.save();
              return { done }; // wrapped: an async function would wait for a returned promise
            },
            async ({ done }) => {
              const worker = new BeeQueue(names[0], { redis, getEvents: false });
              worker.process(1, async (job: BeeQueue.Job<number>) => `ok-${job.data}`);
              await done;
              return () => worker.close(5_000);
            },
          ),
      };
    }
    if (isRoundtrip(scenario)) {
      const producer = open(names[0], { isWorker: false });
      const worker = open(names[0], { getEvents: false });
      worker.process(1, async (job: BeeQueue.Job<number>) => `ok-${job.data}`);
      await Promise.all([producer.ready(), worker.ready()]);
      const once = async (i: number) => {
        const job = producer.createJob(i);
        const done = new Promise((resolve, reject) => {
          job.on('succeeded', resolve);
          job.on('failed', reject);
        });
        await job.save();
        await done;
      };
      const warm = await warmUpRoundTrips(once);
      return {
        cleanup,
        committed: async () => (await health('succeeded')) - warm,
        timed: () => timeRoundTrips(jobs, once),
      };
    }

    // Drains: pre-fill with saveAll (untimed), then time worker start → N successes.
    const producers = names.map((name) => open(name, { isWorker: false, getEvents: false }));
    let chunks = 0;
    await inBatches(jobs, (from, count) => {
      const producer = producers[chunks++ % queueCount];
      return producer.saveAll(Array.from({ length: count }, (_, k) => producer.createJob(from + k)));
    });
    const concurrency = scenario === 'drain-c1' ? 1 : queueCount > 1 ? 5 : 50;
    return {
      note: queueCount > 1 ? 'beequeue: no group caps; 10 queues x worker concurrency 5 (per process, not fleet-wide)' : undefined,
      cleanup,
      committed: () => health('succeeded'),
      timed: async () => {
        const finished = completionCounter(jobs);
        for (const name of names) {
          const worker = open(name, { getEvents: false });
          worker.on('succeeded', finished.tick);
          worker.process(concurrency, async (job: BeeQueue.Job<number>) => `ok-${job.data}`);
        }
        await finished.all;
        return {};
      },
    };
  }
}
