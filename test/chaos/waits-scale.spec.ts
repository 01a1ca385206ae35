import { join } from 'node:path';
import Redis from 'ioredis';
import { mostInFlight } from '../../lib/worker/run.launcher';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, TestApp, uniqueNamespace } from '../support/app';
import { RedisProcess } from '../support/redis-process';
import { ChildMessage, ChildWorker } from './child-worker';

/**
 * Acceptance test of durable waits at scale: 10,000 runs, each step → ctx.sleep(2 s) → step, on
 * ONE forked worker process at worker concurrency 10. If a sleeping run held its slot, the 10
 * slots would serialise the sleeps: 10,000 × 2 s / 10 = 2,000 s. A sleeping run holds nothing, so
 * all of them sleep at once and the whole batch takes about the 2 s plus the time to execute
 * 20,000 steps; the bound below (120 s) is a correctness bound that proves the point with a wide
 * margin on a slow, shared machine, not a performance assertion.
 *
 * Measured and printed: time to enqueue, time until all sleep, time from the last sleep's wake to
 * all completed; the worker's RSS and heap (after a full GC: it runs with --expose-gc) idle,
 * while all sleep and after all completed; Redis memory per sleeping run (used_memory delta
 * between before the enqueue and all asleep, / 10,000, and MEMORY USAGE of one sleeping run's
 * hash). On a redis-server of its own, so the memory delta holds only this test's keys; side
 * effects are counted in the worker process (waits-scale.process.ts), not in Redis, for the same
 * reason.
 */
jest.setTimeout(300_000);

const RUNS = 10_000;
const SLEEP_MS = 2_000;
const CONCURRENCY = 10;
const WALL_BOUND_MS = 120_000;
const WORKFLOW = 'waits-scale.sleeper';

interface Memory {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
const usedMemory = async (redis: Redis) => Number(/^used_memory:(\d+)/m.exec(await redis.info('memory'))![1]);

describe('durable waits at scale', () => {
  const ns = uniqueNamespace('waits-scale');
  const base = `{sluice:${ns}}:`;
  let server: RedisProcess;
  let redis: Redis;
  let producer: TestApp | undefined;
  let child: ChildWorker | undefined;
  let sampling = false;

  beforeAll(async () => {
    server = await RedisProcess.start();
    redis = new Redis(server.url);
  });

  afterAll(async () => {
    sampling = false;
    await child?.kill();
    await producer?.close();
    await redis?.quit();
    await server?.stop();
  });

  const memoryOf = async (worker: ChildWorker, tag: string): Promise<Memory & { gc: boolean }> => {
    worker.send(`memory:${tag}`);
    const reply = await worker.waitFor((m) => m.tag === tag, `memory report ${tag}`, 30_000);
    return { ...(reply.memory as Memory), gc: reply.gc as boolean };
  };

  it(`${RUNS} runs sleeping ${SLEEP_MS} ms each complete on one process at concurrency ${CONCURRENCY}: no slot is held while asleep`, async () => {
    const worker = (child = new ChildWorker(
      {
        REDIS_URL: server.url,
        NS: ns,
        RUNS: String(RUNS),
        SLEEP_MS: String(SLEEP_MS),
        CONCURRENCY: String(CONCURRENCY),
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --expose-gc`.trim(),
      },
      join(__dirname, 'waits-scale.process.ts'),
    ));
    const failures: ChildMessage[] = [];
    worker.proc.on('message', (m: ChildMessage) => void (m.failedRun && failures.push(m)));
    await worker.waitFor((m) => m.ready === true, 'ready', 90_000);
    producer = await createApp([], { namespace: ns, connection: { url: server.url }, worker: { enabled: false } });
    const client = producer.client;
    // Loads the producer's scripts and settles its connections before the baseline.
    expect((await client.stats()).workflows[WORKFLOW]).toEqual(expect.objectContaining({ waiting: 0, sleeping: 0, completed: 0 }));

    const idle = await memoryOf(worker, 'idle');
    const redisBefore = await usedMemory(redis);

    // 1. Enqueue (the worker is up: the first runs start while later ones are still enqueued).
    const t0 = Date.now();
    const ids: string[] = [];
    for (let i = 0; i < RUNS; i += 1_000) {
      const handles = await client.enqueueMany(
        WORKFLOW,
        Array.from({ length: Math.min(1_000, RUNS - i) }, (_, k) => ({ input: { i: i + k } })),
      );
      ids.push(...handles.map((h) => h.id));
    }
    const enqueuedAt = Date.now();
    expect(new Set(ids).size).toBe(RUNS);

    // 2. Every run has gone to sleep: the worker's RUNS-th 'suspended' event, with its memory at
    // that moment. Unless the worker puts all 10,000 to sleep within 2 s, the first ones wake
    // (leave the sleeping index, due again) before the last one sleeps: how many were still
    // asleep then is printed, and a sampler records the most asleep at once and the most leases
    // held at any time.
    let maxActive = 0;
    let maxSleeping = 0;
    const sleepingIndex = `${base}wf:${WORKFLOW}:sleeping`;
    sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [[, sleeping], [, active]] = (await redis.multi().zcard(sleepingIndex).zcard(`${base}leases`).exec()) as [unknown, number][];
        maxSleeping = Math.max(maxSleeping, sleeping);
        maxActive = Math.max(maxActive, active);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })().catch(() => undefined); // a failed test's afterAll closes the connection under it
    const suspendedMessage = await worker.waitFor((m) => typeof m.allSuspended === 'number', 'all suspended', WALL_BOUND_MS);
    const [redisAsleep, asleepNow, [lastId, lastDeadline], [, firstDeadline]] = await Promise.all([
      usedMemory(redis),
      redis.zcard(sleepingIndex),
      redis.zrange(sleepingIndex, -1, -1, 'WITHSCORES'),
      redis.zrange(sleepingIndex, 0, 0, 'WITHSCORES'),
    ]);
    const allSuspendedAt = suspendedMessage.allSuspended as number;
    const asleep = { ...(suspendedMessage.memory as Memory), gc: suspendedMessage.gc as boolean };
    // The last run to fall asleep is certainly still asleep: its hash as a sleeping run's.
    const runHashBytes = Number(await redis.memory('USAGE', `${base}run:${lastId}`, 'SAMPLES', 0));
    const sampleRun = await redis.hgetall(`${base}run:${lastId}`);
    const stats = (await client.stats()).workflows[WORKFLOW];

    // 3. All complete.
    const allCompletedAt = (await worker.waitFor((m) => typeof m.allCompleted === 'number', 'all completed', WALL_BOUND_MS))
      .allCompleted as number;
    sampling = false;
    await sampler;
    // Worker heap: a sleeping run should cost the worker nothing once its attempt has ended, so
    // 'all asleep' and 'all done' should be close to 'idle'. They are printed, not asserted.
    const done = await memoryOf(worker, 'done');
    const wallMs = allCompletedAt - t0;

    const stop = await worker.stop();
    const report = stop.report as {
      before: number[];
      after: number[];
      started: number[];
      completed: number;
      suspended: number;
      maxExecuting: number;
    };

    const perRunBytes = (redisAsleep - redisBefore) / RUNS;
    console.log(
      [
        `durable waits at scale: ${RUNS} runs, step → ctx.sleep(${SLEEP_MS} ms) → step, 1 worker process, concurrency ${CONCURRENCY}`,
        `  enqueue (enqueueMany × ${RUNS / 1_000}):              ${enqueuedAt - t0} ms`,
        `  until all asleep:                         ${allSuspendedAt - t0} ms (the worker's ${RUNS}th 'suspended' event; the last sleep began at ${Number(lastDeadline) - SLEEP_MS - t0} ms by its deadline)`,
        `    then: ${asleepNow} still asleep, ${RUNS - asleepNow} woken already; most asleep at once (sampled every ~10 ms): ${maxSleeping}`,
        `  wakes still ahead then:                   first at ${Number(firstDeadline) - t0} ms, last at ${Number(lastDeadline) - t0} ms`,
        `  last wake → all completed:                ${allCompletedAt - Number(lastDeadline)} ms`,
        `  total wall (enqueue start → all completed): ${wallMs} ms (bound ${WALL_BOUND_MS} ms; were a slot held while asleep: ≥ ${(RUNS * SLEEP_MS) / CONCURRENCY / 1000} s)`,
        `  most attempts executing code at once:     ${report.maxExecuting} (leases held in Redis, sampled: at most ${maxActive})`,
        `  worker memory${asleep.gc ? ' (after global.gc())' : ' (no --expose-gc: without a GC)'}:`,
        `    idle:        rss ${mb(idle.rss)}, heapUsed ${mb(idle.heapUsed)}, heapTotal ${mb(idle.heapTotal)}`,
        `    all asleep:  rss ${mb(asleep.rss)}, heapUsed ${mb(asleep.heapUsed)}, heapTotal ${mb(asleep.heapTotal)}  (heapUsed +${((asleep.heapUsed - idle.heapUsed) / RUNS).toFixed(0)} B per sleeping run over idle)`,
        `    all done:    rss ${mb(done.rss)}, heapUsed ${mb(done.heapUsed)}, heapTotal ${mb(done.heapTotal)}  (heapUsed +${((done.heapUsed - idle.heapUsed) / RUNS).toFixed(0)} B per run over idle)`,
        `  Redis used_memory: before ${mb(redisBefore)}, all gone to sleep ${mb(redisAsleep)}: ${perRunBytes.toFixed(0)} B per run (${asleepNow} asleep, the rest woken with the same memo)`,
        `  MEMORY USAGE of a sleeping run's hash:    ${runHashBytes} B (${Object.keys(sampleRun).length} fields: ${Object.keys(sampleRun).join(' ')})`,
        `  stats while asleep: sleeping ${stats.sleeping}, delayed ${stats.delayed}, waiting ${stats.waiting}, active ${stats.active}`,
      ].join('\n'),
    );

    // Correctness: no failed attempt, every run completed with its own result, each step executed
    // exactly once per run (the replay after the wake took the first step from the memo), every
    // run in exactly two attempts (the one that slept, the one after its wake).
    expect(failures).toEqual([]);
    expect(report.completed).toBe(RUNS);
    expect(report.suspended).toBe(RUNS);
    expect(report.before.filter((n) => n !== 1)).toEqual([]);
    expect(report.after.filter((n) => n !== 1)).toEqual([]);
    expect(report.started.filter((n) => n !== 2)).toEqual([]);
    expect(report.maxExecuting).toBeLessThanOrEqual(CONCURRENCY);
    // Leases: the runs executing, plus the claimed runs a worker of short runs holds ready (see
    // RunLauncher) — never a sleeping run's.
    expect(maxActive).toBeLessThanOrEqual(mostInFlight(CONCURRENCY));
    // Far more runs asleep at once than there are slots: none of them holds one.
    expect(maxSleeping).toBeGreaterThan(CONCURRENCY * 10);
    expect(sampleRun.state).toBe('delayed');
    expect(sampleRun.wait).toMatch(/^sleep \d+ /);

    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.hmget(`${base}run:${id}`, 'state', 'attempts', 'failures', 'result', 'wait');
    const rows = ((await pipeline.exec()) ?? []).map(([error, row]) => {
      if (error) throw error;
      return row as (string | null)[];
    });
    const wrong = rows
      .map((row, i) => ({ id: ids[i], row }))
      .filter(
        ({ row: [state, attempts, failures, result, wait] }) =>
          // A lean run record has no `failures` while it is 0.
          state !== 'completed' || attempts !== '2' || (failures ?? '0') !== '0' || wait !== null || result === null,
      );
    expect(wrong.slice(0, 5)).toEqual([]);
    expect(rows.map(([, , , result]) => JSON.parse(result!).i).sort((a, b) => a - b)).toEqual(Array.from({ length: RUNS }, (_, i) => i));
    expect(await redis.zcard(`${base}wf:${WORKFLOW}:sleeping`)).toBe(0);
    expect(await redis.zcard(`${base}wf:${WORKFLOW}:delayed`)).toBe(0);
    expect(await redis.zcard(`${base}leases`)).toBe(0);
    expectConsistent(await auditNamespace(redis, { namespace: ns, acknowledged: ids }));

    // The point: nowhere near 2,000 s.
    expect(wallMs).toBeLessThan(WALL_BOUND_MS);
    // Nothing of a suspended or finished attempt stays in the worker (after a GC): a shared
    // never-settling promise once kept every suspended attempt alive, ~7 KB a run (70 MB here).
    expect(done.heapUsed - idle.heapUsed).toBeLessThan(RUNS * 1024);
  });
});
