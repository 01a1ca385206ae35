import 'reflect-metadata';
import { DynamicModule, Inject, Injectable, Module, Provider, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import Redis from 'ioredis';
import { QueueClient, QueueModule, QueueModuleOptions, RunEvents, Step, Workflow } from '../lib';
import {
  BenchSystem,
  deferred,
  inBatches,
  inParallel,
  isDrain,
  isRoundtrip,
  timeFirstClaims,
  timeRoundTrips,
  warmUpRoundTrips,
  PreparedRun,
  ScenarioName,
} from './bench.types';
import { prepareSleepBetweenSteps } from './sleep.scenario';

export const NAMESPACE = 'bench';
const TARGET = Symbol('TARGET');

@Workflow('bench.echo')
export class EchoWorkflow {
  run(input: number): string {
    return `ok-${input}`;
  }
}

@Workflow('bench.steps')
class StepsWorkflow {
  async run(input: number): Promise<string> {
    const a = await this.one(input);
    const b = await this.two(a);
    return this.three(b);
  }
  @Step() async one(n: number) {
    return n + 1;
  }
  @Step() async two(n: number) {
    return n + 1;
  }
  @Step() async three(n: number) {
    return `ok-${n}`;
  }
}

/** Runs spread over 10 groups (tenants), each capped at 5 concurrent runs fleet-wide. */
@Workflow('bench.groups', { groupConcurrency: 5 })
class GroupsWorkflow {
  run(input: number): string {
    return `ok-${input}`;
  }
}

/** Resolves once the worker has committed `TARGET` runs (RunEvents fire after the commit). */
@Injectable()
export class CompletionCounter {
  readonly done = deferred();
  private count = 0;
  constructor(events: RunEvents, @Inject(TARGET) target: number) {
    events.on('completed', () => ++this.count === target && this.done.resolve());
  }
}

/** Module options every Sluice app of this bench run gets on top of its own (`--compact-records` sets compactRunRecords). */
export const extraSluiceOptions: Partial<QueueModuleOptions> = {};

function app(url: string, workflows: Type[], worker: { enabled: boolean; concurrency?: number }, target = 0): DynamicModule {
  return benchModule({ url }, NAMESPACE, workflows, worker, target);
}

/** The bench's Nest module on any connection (a cluster too) and namespace; also used by cluster.worker.ts. */
export function benchModule(
  connection: QueueModuleOptions['connection'],
  namespace: string,
  workflows: Type[],
  worker: { enabled: boolean; concurrency?: number },
  target = 0,
  extraProviders: Provider[] = [],
): DynamicModule {
  @Module({})
  class BenchModule {}
  const providers: Provider[] = [...workflows, { provide: TARGET, useValue: target }, CompletionCounter, ...extraProviders];
  return { module: BenchModule, imports: [QueueModule.forRoot({ ...extraSluiceOptions, connection, namespace, worker })], providers };
}

export async function start(module: DynamicModule) {
  return NestFactory.createApplicationContext(module, { logger: ['error'] });
}

export class SluiceSystem implements BenchSystem {
  readonly name = 'sluice';

  async prepare(scenario: ScenarioName, jobs: number, url: string): Promise<PreparedRun> {
    if (scenario === 'sleep-between-steps') return prepareSleepBetweenSteps(jobs, url);
    if (isDrain(scenario)) return this.drain(scenario, jobs, url);
    const worker = isRoundtrip(scenario);
    const apart = scenario === 'roundtrip-apart';
    const ctx = await start(
      app(url, [EchoWorkflow], { enabled: worker && !apart, ...(scenario === 'roundtrip-c1' && { concurrency: 1 }) }),
    );
    const workerApp = apart ? await start(app(url, [EchoWorkflow], { enabled: true })) : undefined;
    const client = ctx.get(QueueClient);
    const committed = () => countRuns(url, worker ? 'completed' : undefined);
    const cleanup = async () => {
      await ctx.close();
      await workerApp?.close();
    };
    if (scenario === 'first-claim') {
      // The producer app stays up; each sample bootstraps a worker app (workers start, migrate()
      // runs) and ends when the waiting run's result arrives. The wait starts with the bootstrap,
      // as BullMQ's (its Worker's constructor returns at once, before its connection is ready).
      return {
        committed: () => countRuns(url, 'completed'),
        cleanup,
        timed: () =>
          timeFirstClaims(
            jobs,
            (i) => client.enqueue(EchoWorkflow, i),
            async (handle) => {
              const result = handle.result();
              const workerApp = await start(app(url, [EchoWorkflow], { enabled: true }));
              await result;
              return () => workerApp.close();
            },
          ),
      };
    }
    if (isRoundtrip(scenario)) {
      const warm = await warmUpRoundTrips((i) => client.run(EchoWorkflow, i));
      return {
        committed: async () => (await committed()) - warm,
        cleanup,
        timed: () => timeRoundTrips(jobs, (i) => client.run(EchoWorkflow, i)),
      };
    }
    if (scenario === 'enqueue-batch') {
      return {
        committed,
        cleanup,
        timed: async () => (
          await inBatches(jobs, (from, count) =>
            client.enqueueMany(
              EchoWorkflow,
              Array.from({ length: count }, (_, k) => ({ input: from + k })),
            ),
          ),
          {}
        ),
      };
    }
    const inFlight = scenario === 'enqueue-c50' ? 50 : 1;
    return { committed, cleanup, timed: async () => (await inParallel(jobs, inFlight, (i) => client.enqueue(EchoWorkflow, i)), {}) };
  }

  private async drain(scenario: ScenarioName, jobs: number, url: string): Promise<PreparedRun> {
    const groups = scenario === 'drain-c50-10groups';
    const workflow = scenario === 'drain-c50-3steps' ? StepsWorkflow : groups ? GroupsWorkflow : EchoWorkflow;
    const workflows = [workflow];
    const producer = await start(app(url, workflows, { enabled: false }));
    const client = producer.get(QueueClient);
    await inBatches(jobs, (from, count) =>
      client.enqueueMany(
        workflow as typeof EchoWorkflow,
        Array.from({ length: count }, (_, k) => ({ input: from + k, opts: groups ? { group: `tenant-${(from + k) % 10}` } : {} })),
      ),
    );
    await producer.close();
    let worker: Awaited<ReturnType<typeof start>> | undefined;
    return {
      note: groups ? 'sluice: one workflow, 10 groups, groupConcurrency 5 (fleet-wide, in Redis)' : undefined,
      timed: async () => {
        worker = await start(app(url, workflows, { enabled: true, concurrency: scenario === 'drain-c1' ? 1 : 50 }, jobs));
        await worker.get(CompletionCounter).done.promise;
        return {};
      },
      committed: () => countRuns(url, 'completed'),
      cleanup: async () => worker?.close(),
    };
  }
}

/** Runs in the bench namespace (in `state` if given), by a scan: untimed, after the fact. */
export async function countRuns(url: string, state?: string): Promise<number> {
  const redis = new Redis(url);
  const count = await countRunsOn(redis, NAMESPACE, state);
  await redis.quit();
  return count;
}

/** Runs of `namespace` on the node `redis` is connected to (on a cluster: the master of its slot), in `state` if given. */
export async function countRunsOn(redis: Redis, namespace: string, state?: string): Promise<number> {
  let count = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `{sluice:${namespace}}:run:*`, 'COUNT', 1000);
    cursor = next;
    if (!state) count += keys.length;
    else if (keys.length) {
      const states = await Promise.all(keys.map((key) => redis.hget(key, 'state')));
      count += states.filter((s) => s === state).length;
    }
  } while (cursor !== '0');
  return count;
}
