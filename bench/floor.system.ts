import Redis from 'ioredis';
import {
  BenchSystem,
  inBatches,
  inParallel,
  isDrain,
  isRoundtrip,
  latencyOf,
  PreparedRun,
  ScenarioName,
  warmUpRoundTrips,
} from './bench.types';

/**
 * The cheapest Redis work that still looks like a queue: the ceiling nothing can beat here.
 * Round trips and enqueues are compared with raw PING (1 and 50 in flight); drains with a
 * trivial Lua queue: batch LPOP of 50, then one script call per job to record it as done.
 */
const COMPLETE = `redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return redis.call('INCR', KEYS[2])`;

export class FloorSystem implements BenchSystem {
  readonly name = 'floor';

  noEquivalent(scenario: ScenarioName): string | undefined {
    if (scenario === 'first-claim') return 'floor: no equivalent (no worker to start)';
    return scenario === 'sleep-between-steps' ? 'floor: no equivalent (a sleep has no raw-Redis floor)' : undefined;
  }

  async prepare(scenario: ScenarioName, jobs: number, url: string): Promise<PreparedRun> {
    const redis = new Redis(url);
    redis.defineCommand('floorComplete', { numberOfKeys: 2, lua: COMPLETE });
    const cleanup = async () => void (await redis.quit());
    let done = 0;
    if (scenario === 'enqueue-batch') {
      return {
        note: 'floor: one RPUSH of 1,000 values per batch',
        cleanup,
        committed: async () => done,
        timed: async () => (
          await inBatches(
            jobs,
            async (from, count) =>
              void (await redis.rpush('floor:batch', ...Array.from({ length: count }, (_, k) => from + k)), (done += count)),
          ),
          {}
        ),
      };
    }
    if (!isDrain(scenario) || scenario === 'drain-c1') {
      const inFlight = scenario === 'enqueue-c50' ? 50 : 1;
      if (isRoundtrip(scenario)) await warmUpRoundTrips(() => redis.ping());
      return {
        note: `floor: PING, ${inFlight} in flight`,
        cleanup,
        committed: async () => done,
        timed: async () => {
          const samples: number[] = [];
          await inParallel(jobs, inFlight, async () => {
            const t = performance.now();
            await redis.ping();
            samples.push(performance.now() - t);
            done++;
          });
          return isRoundtrip(scenario) ? { latency: latencyOf(samples) } : {};
        },
      };
    }
    for (let i = 0; i < jobs; i += 10_000) {
      await redis.rpush('floor:jobs', ...Array.from({ length: Math.min(10_000, jobs - i) }, (_, k) => String(i + k)));
    }
    return {
      note: 'floor: Lua queue, LPOP 50 + one script per job, c=50',
      cleanup,
      committed: async () => Number(await redis.get('floor:done')),
      timed: async () => {
        const complete = (redis as unknown as { floorComplete(...a: string[]): Promise<number> }).floorComplete.bind(redis);
        for (;;) {
          const batch = await redis.lpop('floor:jobs', 50);
          if (!batch?.length) return {};
          await Promise.all(batch.map((id) => complete('floor:results', 'floor:done', id, 'ok')));
        }
      },
    };
  }
}
