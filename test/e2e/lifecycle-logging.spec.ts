import 'reflect-metadata';
import { Test, TestingModule } from '@nestjs/testing';
import Redis from 'ioredis';
import { QueueClient, QueueModule, QueueModuleOptions, RunContext, Workflow } from '../../lib';
import { dropNamespace, rawRedis, testConnection, uniqueNamespace } from '../support/app';
import { LogCapture } from '../support/log-capture';
import { Gates, pollUntil } from '../support/workflows';

/**
 * What a process says about its own life, all through Nest's Logger with context 'Sluice': one
 * line per worker or producer start and stop naming the namespace (and, for a worker, its
 * workflows and concurrency), and one line when a shutdown starts draining, with the count.
 */

const gates = new Gates();

@Workflow('life.gated')
class GatedWorkflow {
  async run(input: { key: string }, _ctx: RunContext) {
    await gates.get(input.key).promise;
    return input.key;
  }
}

@Workflow('life.other')
class OtherWorkflow {
  async run() {
    return 1;
  }
}

async function boot(
  logs: LogCapture,
  providers: unknown[],
  options: Partial<QueueModuleOptions> & { namespace: string },
): Promise<{ app: TestingModule; client: QueueClient }> {
  const app = await Test.createTestingModule({
    imports: [QueueModule.forRoot({ connection: testConnection(), ...options })],
    providers: providers as never[],
  }).compile();
  app.useLogger(logs);
  await app.init();
  return { app, client: app.get(QueueClient) };
}

describe('lifecycle log lines', () => {
  let redis: Redis;
  const namespaces: string[] = [];

  beforeAll(() => {
    redis = rawRedis();
  });

  afterAll(async () => {
    gates.openAll();
    for (const ns of namespaces) await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('a worker: one start line with namespace, workflows and concurrency; on shutdown one draining line with the runs in flight, then one stop line', async () => {
    const logs = new LogCapture();
    const namespace = uniqueNamespace('life');
    namespaces.push(namespace);
    const { app, client } = await boot(logs, [GatedWorkflow, OtherWorkflow], {
      namespace,
      worker: { concurrency: 4, shutdownTimeoutMs: 10_000 },
    });
    // Other lines come at boot too (the namespace's layout mark, the server check's notes).
    const lifecycle = (since = 0) =>
      logs.lines
        .slice(since)
        .filter((line) => line.context === 'Sluice' && /^(Worker|Producer) /.test(line.message))
        .map((line) => [line.level, line.message]);
    expect(lifecycle()).toEqual([
      ['log', `Worker started for namespace ${namespace} (prefix sluice): workflows life.gated, life.other; concurrency 4`],
    ]);

    const handles = await Promise.all(['g1', 'g2'].map((key) => client.enqueue(GatedWorkflow, { key: `${namespace}:${key}` })));
    await pollUntil(
      () => Promise.all(handles.map((h) => client.get(h.id))),
      (runs) => runs.every((run) => run?.state === 'active'),
      'both runs active',
    );
    const mark = logs.mark();
    const closing = app.close();
    // The drain waits for the two runs: let them finish once it says it is waiting.
    await pollUntil(
      async () => logs.find('log', 'Worker stopping', mark).length,
      (n) => n === 1,
      'the draining line',
    );
    gates.open(`${namespace}:g1`);
    gates.open(`${namespace}:g2`);
    await closing;

    expect(lifecycle(mark)).toEqual([
      ['log', `Worker stopping for namespace ${namespace} (prefix sluice): draining 2 run(s) in flight (up to 10000 ms)`],
      ['log', `Worker stopped for namespace ${namespace} (prefix sluice)`],
    ]);
  });

  it('a producer: one start line saying why it runs no worker, one stop line', async () => {
    const logs = new LogCapture();
    const namespace = uniqueNamespace('life');
    namespaces.push(namespace);
    const { app } = await boot(logs, [GatedWorkflow], { namespace, worker: { enabled: false } });
    await app.close();
    const other = await boot(logs, [], { namespace, prefix: 'life' });
    await other.app.close();
    const lifecycle = logs.lines
      .filter((line) => line.context === 'Sluice' && /^(Worker|Producer) /.test(line.message))
      .map((line) => [line.level, line.message]);
    expect(lifecycle).toEqual([
      ['log', `Producer started for namespace ${namespace} (prefix sluice): no worker in this process (worker.enabled is false)`],
      ['log', `Producer stopped for namespace ${namespace} (prefix sluice)`],
      ['log', `Producer started for namespace ${namespace} (prefix life): no worker in this process (no @Workflow providers in this app)`],
      ['log', `Producer stopped for namespace ${namespace} (prefix life)`],
    ]);
    await dropNamespace(redis, namespace, 'life');
  });
});
