import Redis from 'ioredis';
import { uniqueNamespace } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { appOn } from '../support/fault';
import { RedisProcess } from '../support/redis-process';
import { pollUntil } from '../support/workflows';
import { StallWorkflow } from './chaos.workflows';
import { ChildWorker } from './child-worker';

/**
 * A deployed worker process (shutdown hooks on) gets SIGTERM after Redis went away, came back and
 * went away again, with a run in flight that never finishes: it must exit within
 * `shutdownTimeoutMs` plus the documented few seconds, whatever Redis does.
 */
jest.setTimeout(120_000);

const SHUTDOWN_TIMEOUT_MS = 1_000;
/** The documented bound (docs/guarantees.md): shutdownTimeoutMs + about 5 s; one more second for the process to exit. */
const EXIT_BOUND_MS = SHUTDOWN_TIMEOUT_MS + 6_000;

describe('SIGTERM to a worker process after Redis outages', () => {
  let server: RedisProcess;
  const children: ChildWorker[] = [];

  beforeEach(async () => {
    server = await RedisProcess.start({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  });

  afterEach(async () => {
    await Promise.all(children.splice(0).map((child) => child.kill()));
    await server.stop();
  });

  async function workerWithRunInFlight() {
    const ns = uniqueNamespace('sigterm');
    const child = new ChildWorker({
      REDIS_URL: server.url,
      NS: ns,
      MODE: 'stall',
      CONCURRENCY: '2',
      LOCK_MS: '5000',
      SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
      REDIS_TIMEOUT_MS: '2000',
      SHUTDOWN_HOOKS: '1',
    });
    children.push(child);
    await child.waitFor((m) => m.ready === true, 'ready');
    const producer = await appOn(server.url, [], { namespace: ns, worker: { enabled: false } });
    const handle = await producer.client.enqueue(StallWorkflow, { label: 'held' });
    await child.waitFor((m) => m.started === handle.id, 'the run to start');
    await producer.close();
    return { child, ns };
  }

  /** With the worker gone and Redis up, the run it left is in one consistent place (active with its lease, or handed back). */
  async function expectConsistentNamespace(ns: string) {
    if (server.state() === 'exited') await server.restart();
    const redis = new Redis(server.url);
    try {
      expectConsistent(await auditNamespace(redis, { namespace: ns }));
    } finally {
      redis.disconnect();
    }
  }

  async function expectExitWithinBound(child: ChildWorker) {
    const sentAt = Date.now();
    child.proc.kill('SIGTERM');
    const exit = await Promise.race([
      child.exited,
      new Promise<'still alive'>((resolve) => setTimeout(() => resolve('still alive'), 30_000).unref()),
    ]);
    expect(exit).not.toBe('still alive');
    expect(Date.now() - sentAt).toBeLessThan(EXIT_BOUND_MS);
  }

  it('exits in bound while Redis is down again after an earlier outage', async () => {
    const { child, ns } = await workerWithRunInFlight();
    await server.kill('SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 3_000)); // an outage the worker lives through
    await server.restart();
    const redis = new Redis(server.url);
    // Back: the worker reconnected (its connections show up again) before the second outage.
    await pollUntil(
      () => redis.client('LIST') as Promise<string>,
      (list) => list.includes(':blocking'),
      'the worker to reconnect',
      20_000,
    );
    redis.disconnect();
    await server.kill('SIGKILL');
    await expectExitWithinBound(child);
    await expectConsistentNamespace(ns);
  });

  it('exits in bound once Redis is back after an outage', async () => {
    const { child, ns } = await workerWithRunInFlight();
    await server.kill('SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    await server.restart();
    await expectExitWithinBound(child);
    await expectConsistentNamespace(ns);
  });
});
