/**
 * What Sluice costs Redis per job, counted in instructions rather than timed: a private
 * redis-server under `valgrind --tool=callgrind`, Sluice's own producer and worker apps, and the
 * server's user-space instructions per job over the steady state (a warm-up of 100 jobs first,
 * then the counters are zeroed). Callgrind counts instructions, not seconds, so two builds compare
 * to within about 1 % on a busy shared machine, where bench/main.ts's "redis µs/job" drifts by tens
 * of percent. Not exactly repeatable: the server's timers (serverCron, 10 times a second) are
 * counted too, so a run slowed by a busy machine counts a little more (383.1k against 377.4k per
 * round trip for the same build, run alone and beside the CI suites). The kernel's share (socket
 * reads and writes) is not counted.
 *
 * `npx ts-node --transpile-only bench/redis.instructions.ts [--jobs 500] [--scenario <name>] [--keep]`
 *
 * Scenarios: `enqueue-seq` (one enqueue at a time, no worker), `roundtrip` (enqueue, then wait
 * for the result, with the worker in the same app) and `first-claim` (as bench/main.ts's: a run
 * enqueued, a worker app booted for it, its result awaited, the worker closed; use a few dozen
 * jobs), each for Sluice and for bee-queue (set up as in beequeue.system.ts), the peer with the
 * least Redis work per job in bench/main.ts's one-at-a-time scenarios. `--keep` keeps the dumps,
 * for `callgrind_annotate --inclusive=yes <dump>` (which of the server's functions the count is
 * in). Redis runs about 50 times slower under valgrind, so no time is compared: the counts say how
 * much of a "redis µs/job" gap is the server's own work (its Lua and commands) rather than the
 * kernel's sockets, which cost about the same per message for every system.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BeeQueue from 'bee-queue';
import Redis from 'ioredis';
import { QueueClient } from '../lib';
import { freePort } from '../test/support/redis-server';
import { benchModule, EchoWorkflow, NAMESPACE, start } from './sluice.system';

const WARM_UP = 100;
/** Fewer for first-claim: each is a worker app's boot. */
const WARM_UP_BOOTS = 10;

/** One system set up for one scenario: its jobs, one at a time, and its teardown. */
interface Subject {
  job(input: number): Promise<unknown>;
  close(): Promise<void>;
}

const SCENARIOS = [
  { name: 'enqueue-seq', worker: false },
  { name: 'roundtrip', worker: true },
  { name: 'first-claim', worker: false, boots: true },
];

const SYSTEMS: { name: string; open(port: number, worker: boolean, boots: boolean): Promise<Subject> }[] = [
  {
    name: 'sluice',
    async open(port, worker, boots) {
      const module = (enabled: boolean) => benchModule({ url: `redis://127.0.0.1:${port}` }, NAMESPACE, [EchoWorkflow], { enabled });
      const app = await start(module(worker));
      const client = app.get(QueueClient);
      // As sluice.system.ts's first-claim: a worker app booted for this run, closed once it is done.
      const firstClaim = async (input: number) => {
        const result = (await client.enqueue(EchoWorkflow, input)).result();
        const workerApp = await start(module(true));
        await result;
        await workerApp.close();
      };
      return {
        job: (input) => (boots ? firstClaim(input) : worker ? client.run(EchoWorkflow, input) : client.enqueue(EchoWorkflow, input)),
        close: () => app.close(),
      };
    },
  },
  {
    name: 'beequeue',
    async open(port, worker, boots) {
      const redis = { host: '127.0.0.1', port };
      const producer = new BeeQueue('bench', { redis, isWorker: false, getEvents: worker || boots });
      const consumer = worker ? new BeeQueue('bench', { redis, getEvents: false }) : undefined;
      consumer?.process(1, async (job: BeeQueue.Job<number>) => `ok-${job.data}`);
      await Promise.all([producer.ready(), consumer?.ready()]);
      return {
        async job(input) {
          const job = producer.createJob(input);
          const done = (consumer || boots) && new Promise((resolve, reject) => job.on('succeeded', resolve).on('failed', reject));
          await job.save();
          if (boots) {
            // As beequeue.system.ts's first-claim: a worker started for this job, closed once it is done.
            const booted = new BeeQueue('bench', { redis, getEvents: false });
            booted.process(1, async (claimed: BeeQueue.Job<number>) => `ok-${claimed.data}`);
            await done;
            await booted.close(5_000);
          }
          await done;
        },
        close: async () => void (await Promise.all([producer.close(), consumer?.close()])),
      };
    },
  },
];

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const jobs = Number(argv.includes('--jobs') ? argv[argv.indexOf('--jobs') + 1] : 500);
  const only = argv.includes('--scenario') ? argv[argv.indexOf('--scenario') + 1] : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-callgrind-'));
  const port = await freePort();
  const server = spawn(
    'valgrind',
    ['--tool=callgrind', `--callgrind-out-file=${dir}/out.%n`, 'redis-server', '--port', String(port), '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  // Zeroes the counters, runs `jobs` jobs, dumps: the dump's total is what those jobs cost.
  const perJob = async (jobsOf: (count: number) => Promise<void>, warmUp: number): Promise<number> => {
    await jobsOf(warmUp);
    execFileSync('callgrind_control', ['--zero', String(server.pid)], { stdio: 'ignore' });
    await jobsOf(jobs);
    const before = new Set(readdirSync(dir));
    execFileSync('callgrind_control', ['--dump', String(server.pid)], { stdio: 'ignore' });
    const dump = readdirSync(dir).find((file) => !before.has(file));
    const total = dump && /^summary: (\d+)/m.exec(readFileSync(join(dir, dump), 'utf8'));
    if (!total) throw new Error('callgrind wrote no dump');
    return Number(total[1]) / jobs;
  };
  const admin = await connectWhenUp(port);
  try {
    let input = 0;
    for (const { name, worker, boots = false } of SCENARIOS) {
      if (only && name !== only) continue;
      const counts = [];
      for (const system of SYSTEMS) {
        const subject = await system.open(port, worker, boots);
        const instructions = await perJob(
          async (count) => {
            for (let i = 0; i < count; i++) await subject.job(input++);
          },
          boots ? WARM_UP_BOOTS : WARM_UP,
        );
        counts.push(`${system.name} ${(instructions / 1000).toFixed(1)}k`);
        await subject.close();
        await admin.flushall();
      }
      console.log(`${name.padEnd(12)} Redis instructions per job: ${counts.join(', ')}`);
    }
  } finally {
    admin.disconnect();
    server.kill();
    if (argv.includes('--keep')) console.log(`callgrind dumps kept in ${dir} (callgrind_annotate <dump>)`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

/** A connection to the server under valgrind, once it accepts one (it starts in seconds, not ms). */
async function connectWhenUp(port: number): Promise<Redis> {
  for (let tries = 0; ; tries++) {
    const redis = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      return redis;
    } catch (error) {
      redis.disconnect();
      if (tries >= 240) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
