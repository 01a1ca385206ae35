import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Redis from 'ioredis';
import { QueueClient, RunCancelledError } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { uniqueNamespace } from '../support/app';
import { auditNamespace, AuditReport, expectConsistent, NO_DEADLINE } from '../support/audit';
import { appOn } from '../support/fault';
import { RedisAdmin, RedisProcess, sluiceConnectionName } from '../support/redis-process';
import { pollUntil } from '../support/workflows';
import { ChildWorker } from './child-worker';
import {
  DW_CHILD,
  DW_EVENT,
  DW_PARENT,
  DW_SLEEPER,
  DW_WAITER,
  ParentInput,
  ParentResult,
  readEffects,
  SleeperInput,
  SleeperResult,
  WaiterInput,
  WaiterResult,
} from './durable-waits.workflows';

/**
 * Durable waits against real process faults. A run in a durable wait holds no lease and lives only
 * in Redis (lua/includes/waits.lua): killing every worker process, or Redis itself (restarted from
 * its AOF), must neither lose it nor run its steps twice.
 *
 * Worker processes are forked (durable-waits.process.ts) on a redis-server of this file's own.
 * Their workflows do a step, a durable wait (ctx.sleep or ctx.waitForEvent), a step; every step
 * execution appends a line to a file of the executing process (durable-waits.process.ts), written
 * synchronously, so it outlives a SIGKILL of that process and any Redis fault. At the end each
 * run must have completed once, with each of its two steps executed exactly once (the kills fall
 * while every run waits: no step is in flight), in exactly two attempts (the second one the
 * resume), and the namespace audit (with the durable-wait rules) must be clean.
 *
 * (a) every worker process SIGKILLed while 5,000 runs sleep and 1,000 wait for events; fresh
 *     workers started once half the sleeps are overdue; events sent with no worker and with the
 *     fresh ones. (b) redis-server SIGKILLed while runs sleep and restarted on its AOF (appendfsync
 *     always) once half the sleeps have ended; the same worker processes reconnect. (c) parents
 *     waiting for child workflows (invokeAll) that sleep, every worker SIGKILLed, some parents
 *     cancelled with no worker alive (the cancel cascades to their children): the audit at rest
 *     checks each parent's count of children left against its memo.
 */
jest.setTimeout(180_000);

const PROCESS = join(__dirname, 'durable-waits.process.ts');
const AOF = ['--appendonly', 'yes', '--appendfsync', 'always'];

interface Fleet {
  server: RedisProcess;
  ns: string;
  keys: RedisKeys;
  fxDir: string;
  redis: Redis;
  client: QueueClient;
  close(): Promise<void>;
}

const fleets: Fleet[] = [];
const children: ChildWorker[] = [];

afterAll(async () => {
  await Promise.all(children.map((child) => child.kill()));
  for (const fleet of fleets) await fleet.close();
});

async function fleet(label: string, args: string[] = []): Promise<Fleet> {
  const server = await RedisProcess.start({ args });
  const ns = uniqueNamespace(label);
  const fxDir = mkdtempSync(join(tmpdir(), 'sluice-dw-fx-'));
  // The producer: the test's own client, no workers (they run in the forked processes).
  const producer = await appOn(server.url, [], { namespace: ns, worker: { enabled: false } });
  const redis = server.connect();
  const f: Fleet = {
    server,
    ns,
    keys: new RedisKeys('sluice', ns),
    fxDir,
    redis,
    client: producer.client,
    close: async () => {
      await producer.close().catch(() => undefined);
      redis.disconnect();
      await server.stop();
      rmSync(fxDir, { recursive: true, force: true });
    },
  };
  fleets.push(f);
  return f;
}

/** Forks `n` worker processes on the fleet's server and resolves once every one has initialised its app. */
async function spawnWorkers(f: Fleet, n: number, env: Record<string, string> = {}): Promise<ChildWorker[]> {
  const spawned = Array.from({ length: n }, () => {
    const child = new ChildWorker({ REDIS_URL: f.server.url, NS: f.ns, FX_DIR: f.fxDir, CONCURRENCY: '100', ...env }, PROCESS);
    children.push(child);
    return child;
  });
  await Promise.all(spawned.map((child) => child.waitFor((m) => m.ready === true, 'ready', 90_000)));
  return spawned;
}

async function sigkill(workers: ChildWorker[]): Promise<void> {
  for (const worker of workers) worker.proc.kill('SIGKILL');
  const exits = await Promise.all(workers.map((worker) => worker.exited));
  for (const exit of exits) expect(exit).toEqual({ code: null, signal: 'SIGKILL' });
}

async function stopAll(workers: ChildWorker[]): Promise<void> {
  const stops = await Promise.all(workers.map((worker) => worker.stop(60_000)));
  for (const stop of stops) expect({ code: stop.code, signal: stop.signal }).toEqual({ code: 0, signal: null });
}

/** Every step execution of every worker process, from their effect files. */
function effectsOf(f: Fleet): Map<string, number[]> {
  const lines = readdirSync(f.fxDir).flatMap((name) => readFileSync(join(f.fxDir, name), 'utf8').split('\n'));
  return readEffects(lines);
}

/** The Redis clock (the one the wait deadlines are on), in ms. */
async function redisNow(redis: Redis): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/**
 * Deadlines of a workflow's sleeping runs (ms, Redis clock): the earliest and latest of all, the
 * latest of those in `short`, the earliest of the others.
 */
async function sleepDeadlines(f: Fleet, workflow: string, short: Set<string> = new Set()) {
  const scored = await f.redis.zrange(f.keys.workflow(workflow, 'sleeping'), 0, -1, 'WITHSCORES');
  let first = NO_DEADLINE;
  let last = 0;
  let shortLast = 0;
  let longFirst = NO_DEADLINE;
  for (let i = 0; i < scored.length; i += 2) {
    const at = Number(scored[i + 1]);
    first = Math.min(first, at);
    last = Math.max(last, at);
    if (short.has(scored[i])) shortLast = Math.max(shortLast, at);
    else longFirst = Math.min(longFirst, at);
  }
  return { first, last, shortLast, longFirst };
}

/**
 * Per run: completed once with its own result, each step executed exactly once (before by an
 * `earlier` pid, after by a `later` one when given), in two attempts, no stall, no failure.
 * Returns the problems found (empty = none).
 */
async function checkRuns(
  f: Fleet,
  runs: { id: string; i: number; result: SleeperResult | WaiterResult }[],
  earlier: Set<number>,
  later: Set<number>,
): Promise<string[]> {
  const effects = effectsOf(f);
  const pipeline = f.redis.pipeline();
  runs.forEach(({ id }) => pipeline.hmget(f.keys.run(id), 'state', 'attempts', 'stalls', 'failures'));
  const rows = ((await pipeline.exec()) ?? []).map(([error, row]) => {
    if (error) throw error;
    return row as string[];
  });
  const problems: string[] = [];
  const known = new Set<string>();
  runs.forEach(({ id, i, result }, index) => {
    // A lean run record has no `stalls` or `failures` while they are 0.
    const [state, attempts, stalls = '0', failures = '0'] = rows[index].map((value) => value ?? undefined);
    if (state !== 'completed' || attempts !== '2' || stalls !== '0' || failures !== '0') {
      problems.push(`${id}: ${state}, ${attempts} attempts, ${stalls} stalls, ${failures} failures`);
    }
    if (result.i !== i || result.attempt !== 2) problems.push(`${id}: result ${JSON.stringify(result)} for input ${i}`);
    for (const step of ['before', 'after'] as const) {
      known.add(`${id} ${step}`);
      const pids = effects.get(`${id} ${step}`) ?? [];
      if (pids.length !== 1) problems.push(`${id}: step ${step} executed ${pids.length} time(s), by [${pids.join(', ')}]`);
      else if (pids[0] !== result[step]) problems.push(`${id}: step ${step} executed by ${pids[0]}, its memo says ${result[step]}`);
      const expected = step === 'before' ? earlier : later;
      if (pids.length === 1 && expected.size > 0 && !expected.has(pids[0]))
        problems.push(`${id}: step ${step} executed by ${pids[0]}, not one of [${[...expected].join(', ')}]`);
    }
  });
  for (const key of effects.keys()) if (!known.has(key)) problems.push(`an execution of ${key}, a run the test did not enqueue`);
  return problems;
}

/** Each handle's result, and when it arrived (ms since the epoch). */
function timed<T>(
  handles: { result(opts: { timeoutMs: number }): Promise<unknown> }[],
  timeoutMs: number,
): Promise<{ result: T; at: number }[]> {
  const all = Promise.all(handles.map((h) => h.result({ timeoutMs }).then((result) => ({ result: result as T, at: Date.now() }))));
  all.catch(() => undefined); // awaited later
  return all;
}

const latest = (rows: { at: number }[]) => Math.max(...rows.map((r) => r.at));

function summary(report: AuditReport): string {
  return `states ${JSON.stringify(report.states)}, waits ${JSON.stringify(report.waits)}, leases ${report.leases}`;
}

describe('durable waits survive process faults', () => {
  it('(a) every worker process SIGKILLed while 5,000 runs sleep and 1,000 wait for events: fresh workers finish each run once, each step once', async () => {
    const SLEEPERS = 5_000;
    /** Waiters: PER_KEY on each of KEYS keys, plus BULK on one more key (more than one send-event call resumes: EVENT_BATCH is 500). */
    const KEYS = 40;
    const PER_KEY = 10;
    const BULK = 600;
    const WAITERS = KEYS * PER_KEY + BULK;
    /** Half the sleeps end while no worker process is alive (overdue for the fresh ones), half under the fresh workers. */
    const SHORT_MS = 9_000;
    const LONG_MS = 17_000;
    const f = await fleet('dw-kill');
    const t0 = Date.now();
    const first = await spawnWorkers(f, 2);
    const firstPids = new Set(first.map((w) => w.pid));
    const booted = Date.now();

    const eventKey = (k: number) => `order-${k}`;
    const BULK_KEY = 'bulk';
    // Every other waiter with a timeout (never reached): a wait in the delayed set too; the others without a deadline.
    const waiterInputs: WaiterInput[] = Array.from({ length: WAITERS }, (_, i) => ({
      i,
      key: i < KEYS * PER_KEY ? eventKey(i % KEYS) : BULK_KEY,
      timeout: i % 2 === 0,
    }));
    const waiters = await f.client.enqueueMany<string>(
      DW_WAITER,
      waiterInputs.map((input) => ({ input })),
    );
    const sleeperInputs: SleeperInput[] = Array.from({ length: SLEEPERS }, (_, i) => ({ i, ms: i % 2 === 0 ? SHORT_MS : LONG_MS }));
    const sleepers = await f.client.enqueueMany<string>(
      DW_SLEEPER,
      sleeperInputs.map((input) => ({ input })),
    );
    const enqueued = Date.now();
    expect([...waiters, ...sleepers].every((h) => h.created)).toBe(true);
    const ids = [...waiters, ...sleepers].map((h) => h.id);
    const waiterDone = timed<WaiterResult>(waiters, 150_000);
    const sleeperDone = timed<SleeperResult>(sleepers, 150_000);

    // Every run in its wait: nothing due, nothing active.
    await pollUntil(
      () => f.client.stats(),
      (s) =>
        s.workflows[DW_SLEEPER]?.sleeping === SLEEPERS &&
        s.workflows[DW_WAITER]?.waitingEvent === WAITERS &&
        s.workflows[DW_SLEEPER].active + s.workflows[DW_WAITER].active === 0,
      'every run in its wait',
      60_000,
    );
    const allWaiting = Date.now();
    await sigkill(first);
    const killed = Date.now();
    // The kill fell before any sleep ended: no run was due, let alone active, while a killed worker lived.
    const deadlines = await sleepDeadlines(f, DW_SLEEPER, new Set(sleepers.filter((_, i) => i % 2 === 0).map((h) => h.id)));
    const killedAtRedis = await redisNow(f.redis);
    if (killedAtRedis >= deadlines.first)
      throw new Error(
        `the machine is too slow for this test: a sleep ended ${killedAtRedis - deadlines.first} ms before the kill (raise SHORT_MS)`,
      );

    // At rest, no worker alive: every run is in its wait, in exactly its indexes.
    const atRest = await auditNamespace(f.redis, { namespace: f.ns, acknowledged: ids });
    expectConsistent(atRest);
    expect(atRest.states).toEqual({ waiting: 0, delayed: SLEEPERS + WAITERS, active: 0, completed: 0, failed: 0, cancelled: 0 });
    expect(atRest.waits).toEqual({ sleep: SLEEPERS, signal: 0, event: WAITERS, child: 0 });
    expect(atRest.leases).toBe(0);

    // Half of the keyed events while no worker runs: those runs become due, for the next workers.
    let resumed = 0;
    for (let k = 0; k < KEYS / 2; k++) resumed += await f.client.sendEvent(DW_EVENT, { key: eventKey(k), payload: { key: eventKey(k) } });
    expect(resumed).toBe((KEYS / 2) * PER_KEY);
    const halfSent = Date.now();

    // No worker until every short sleep has ended: a clock condition, not a stand-in for an event.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, deadlines.shortLast + 100 - Date.now())));
    const respawned = Date.now();
    const second = await spawnWorkers(f, 2);
    const secondPids = new Set(second.map((w) => w.pid));
    const secondReady = Date.now();
    // The other half, and the bulk key, with the fresh workers running.
    for (let k = KEYS / 2; k < KEYS; k++)
      resumed += await f.client.sendEvent(DW_EVENT, { key: eventKey(k), payload: { key: eventKey(k) } });
    const bulk = await f.client.sendEvent(DW_EVENT, { key: BULK_KEY, payload: { key: BULK_KEY } });
    expect(bulk).toBe(BULK);
    expect(resumed + bulk).toBe(WAITERS);
    const eventsSent = Date.now();

    const waited = await waiterDone;
    const slept = await sleeperDone;
    const waiterResults = waited.map((r) => r.result);
    const sleeperResults = slept.map((r) => r.result);
    expect(waiterResults.map((r) => r.key)).toEqual(waiterInputs.map((input) => input.key));
    await stopAll(second);

    const problems = await checkRuns(
      f,
      [
        ...waiters.map((h, i) => ({ id: h.id, i, result: waiterResults[i] })),
        ...sleepers.map((h, i) => ({ id: h.id, i, result: sleeperResults[i] })),
      ],
      firstPids,
      secondPids,
    );
    expect({ problems: problems.length, first: problems.slice(0, 30) }).toEqual({ problems: 0, first: [] });
    const final = await auditNamespace(f.redis, { namespace: f.ns, acknowledged: ids });
    expectConsistent(final);
    expect(final.states).toEqual({ waiting: 0, delayed: 0, active: 0, completed: SLEEPERS + WAITERS, failed: 0, cancelled: 0 });
    expect(final.workflows[DW_SLEEPER].stats.completed).toBe(SLEEPERS);
    expect(final.workflows[DW_WAITER].stats.completed).toBe(WAITERS);

    console.log(
      `durable-waits (a): ${SLEEPERS} sleepers (${SHORT_MS} / ${LONG_MS} ms) + ${WAITERS} event waiters (${PER_KEY} on each of ${KEYS} keys, ${BULK} on one); 2 worker processes ready in ${booted - t0} ms; ` +
        `enqueued in ${enqueued - booted} ms; all in their waits ${allWaiting - enqueued} ms later; both workers SIGKILLed ${killed - allWaiting} ms later, ` +
        `${deadlines.first - killedAtRedis} ms before the first sleep's end; at-rest audit + ${KEYS / 2} events by ${halfSent - killed} ms after the kill; ` +
        `no worker for ${respawned - killed} ms (short sleeps ended ${deadlines.shortLast - killedAtRedis} ms into it); 2 fresh workers ready ${secondReady - respawned} ms later ` +
        `(${deadlines.longFirst - secondReady >= 0 ? `${deadlines.longFirst - secondReady} ms before` : `${secondReady - deadlines.longFirst} ms after`} the first long sleep's end); ` +
        `the other ${KEYS / 2} events and the bulk one sent in ${eventsSent - secondReady} ms; after the fresh workers were ready, the ${WAITERS} event waiters completed in ` +
        `${latest(waited) - secondReady} ms, the ${SLEEPERS / 2} overdue short sleepers in ${latest(slept.filter((_, i) => i % 2 === 0)) - secondReady} ms; ` +
        `the last long sleeper ${latest(slept.filter((_, i) => i % 2 === 1)) - deadlines.last} ms after the last sleep's end. At rest: ${summary(atRest)}`,
    );
  });

  it('(b) Redis SIGKILLed and restarted from its AOF while runs sleep: every run resumes once, completes once', async () => {
    const RUNS = 1_000;
    /** Half the runs' sleeps end while Redis is down, half after it is back. */
    const SHORT_MS = 4_000;
    const LONG_MS = 10_000;
    const f = await fleet('dw-aof', AOF);
    const workers = await spawnWorkers(f, 2, { REDIS_TIMEOUT_MS: '2000' });
    const pids = new Set(workers.map((w) => w.pid));
    const handles = await f.client.enqueueMany<string>(
      DW_SLEEPER,
      Array.from({ length: RUNS }, (_, i) => ({ input: { i, ms: i % 2 === 0 ? SHORT_MS : LONG_MS } satisfies SleeperInput })),
    );
    const enqueued = Date.now();
    const ids = handles.map((h) => h.id);
    const finished = timed<SleeperResult>(handles, 120_000);
    await pollUntil(
      () => f.client.stats({ workflow: DW_SLEEPER }),
      (s) => s.workflows[DW_SLEEPER]?.sleeping === RUNS && s.workflows[DW_SLEEPER].active === 0,
      'every run asleep',
      60_000,
    );
    const asleep = Date.now();
    // The sleeps' deadlines, on the Redis clock (the wall clock of this machine).
    const { first, last, shortLast, longFirst } = await sleepDeadlines(f, DW_SLEEPER, new Set(ids.filter((_, i) => i % 2 === 0)));
    const beforeKill = await redisNow(f.redis);
    if (beforeKill >= first)
      throw new Error(`the machine is too slow for this test: a sleep ended ${beforeKill - first} ms before the kill (raise SHORT_MS)`);

    await f.server.kill('SIGKILL');
    const killedAt = Date.now();
    // Down until every short sleep has ended: a clock condition, not a stand-in for an event.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, shortLast + 200 - Date.now())));
    const restartAt = Date.now();
    await f.server.restart();
    const upAt = Date.now();
    expect(upAt).toBeLessThan(longFirst); // the long sleeps end with Redis up

    // The workers reconnect on their own: their named connections come back.
    const admin = new RedisAdmin(f.server.connect());
    try {
      // Only the worker processes block (the producer has no workers): one blocking connection each.
      await admin.clientsWhen(
        { namePrefix: sluiceConnectionName(f.ns, 'blocking') },
        (clients) => clients.length >= workers.length,
        'the workers reconnect',
        30_000,
      );
    } finally {
      await admin.close();
    }
    const reconnected = Date.now();
    const rows = await finished;
    const settled = rows.map((r) => r.result);
    await stopAll(workers);

    const problems = await checkRuns(
      f,
      handles.map((h, i) => ({ id: h.id, i, result: settled[i] })),
      pids,
      pids,
    );
    expect({ problems: problems.length, first: problems.slice(0, 30) }).toEqual({ problems: 0, first: [] });
    const report = await auditNamespace(f.redis, { namespace: f.ns, acknowledged: ids });
    expectConsistent(report);
    expect(report.states).toEqual({ waiting: 0, delayed: 0, active: 0, completed: RUNS, failed: 0, cancelled: 0 });
    expect(report.workflows[DW_SLEEPER].stats.completed).toBe(RUNS);

    console.log(
      `durable-waits (b): ${RUNS} sleepers (${SHORT_MS} / ${LONG_MS} ms), 2 workers; all asleep ${asleep - enqueued} ms after the enqueue; ` +
        `redis-server SIGKILLed ${killedAt - asleep} ms later, down ${restartAt - killedAt} ms (the short sleeps ended ${shortLast - killedAt} ms into it), ` +
        `AOF reload + ready in ${upAt - restartAt} ms; workers reconnected ${reconnected - upAt} ms after; ` +
        `the ${RUNS / 2} overdue short sleepers all completed ${latest(rows.filter((_, i) => i % 2 === 0)) - upAt} ms after Redis was up; ` +
        `the last of the long ones ${latest(rows.filter((_, i) => i % 2 === 1)) - last} ms after the last deadline`,
    );
  });

  it('(c) parents waiting for sleeping children, every worker SIGKILLed, some parents cancelled meanwhile: each run finishes once', async () => {
    const PARENTS = 300;
    const CHILDREN = 3;
    const CHILD_MS = 5_000;
    const CANCELLED = 10;
    const f = await fleet('dw-child');
    const first = await spawnWorkers(f, 2);
    const firstPids = new Set(first.map((w) => w.pid));
    const inputs: ParentInput[] = Array.from({ length: PARENTS }, (_, i) => ({ i, children: CHILDREN, ms: CHILD_MS }));
    const parents = await f.client.enqueueMany<string>(
      DW_PARENT,
      inputs.map((input) => ({ input })),
    );
    // invoke names each child after its parent and memo key (lib/execution/wait.ids.ts childId).
    const childIds = (parent: string) => Array.from({ length: CHILDREN }, (_, k) => `${parent}/invoke:${DW_CHILD}#${k + 1}`);
    const ids = parents.flatMap((h) => [h.id, ...childIds(h.id)]);
    const outcomes = Promise.all(
      parents.map((h) =>
        h.result({ timeoutMs: 120_000 }).then(
          (result) => result as ParentResult,
          (error: unknown) => error,
        ),
      ),
    );
    outcomes.catch(() => undefined);

    // Every parent waits; of its children, the first has completed, the others sleep.
    await pollUntil(
      () => f.client.stats(),
      (s) =>
        s.workflows[DW_PARENT]?.waitingChild === PARENTS &&
        s.workflows[DW_CHILD]?.sleeping === PARENTS * (CHILDREN - 1) &&
        s.workflows[DW_CHILD]?.completed === PARENTS,
      'every parent waiting, its children asleep or done',
      60_000,
    );
    await sigkill(first);
    const killedAtRedis = await redisNow(f.redis);
    const deadlines = await sleepDeadlines(f, DW_CHILD);
    if (killedAtRedis >= deadlines.first)
      throw new Error(
        `the machine is too slow for this test: a child's sleep ended ${killedAtRedis - deadlines.first} ms before the kill (raise CHILD_MS)`,
      );

    const atRest = await auditNamespace(f.redis, { namespace: f.ns, acknowledged: ids });
    expectConsistent(atRest);
    expect(atRest.waits).toEqual({ sleep: PARENTS * (CHILDREN - 1), signal: 0, event: 0, child: PARENTS });
    const left = await Promise.all(parents.map((h) => f.redis.hget(f.keys.run(h.id), 'waitLeft')));
    expect(new Set(left)).toEqual(new Set([String(CHILDREN - 1)]));

    // With no worker alive, cancel some parents: each takes its sleeping children with it.
    const doomed = parents.slice(0, CANCELLED).map((h) => h.id);
    for (const id of doomed) expect(await f.client.cancel(id)).toEqual({ cancelled: true, state: 'waiting-child', children: CHILDREN - 1 });
    const afterCancel = await auditNamespace(f.redis, { namespace: f.ns, acknowledged: ids });
    expectConsistent(afterCancel);
    expect(afterCancel.states.cancelled).toBe(CANCELLED * CHILDREN);
    expect(afterCancel.waits).toEqual({ sleep: (PARENTS - CANCELLED) * (CHILDREN - 1), signal: 0, event: 0, child: PARENTS - CANCELLED });

    const second = await spawnWorkers(f, 2);
    const secondPids = new Set(second.map((w) => w.pid));
    const settled = await outcomes;
    await stopAll(second);

    const effects = effectsOf(f);
    const problems: string[] = [];
    const once = (key: string, pids: Set<number>) => {
      const by = effects.get(key) ?? [];
      if (by.length !== 1 || !pids.has(by[0])) problems.push(`${key}: executed by [${by.join(', ')}]`);
    };
    parents.forEach((h, i) => {
      const outcome = settled[i];
      once(`${h.id} before`, firstPids);
      childIds(h.id).forEach((child) => once(`${child} work`, firstPids));
      if (i < CANCELLED) {
        if (!(outcome instanceof RunCancelledError)) problems.push(`${h.id}: cancelled, yet ${JSON.stringify(outcome)}`);
        if (effects.has(`${h.id} after`)) problems.push(`${h.id}: cancelled, yet its last step ran`);
      } else {
        const result = outcome as ParentResult;
        if (result?.i !== i || JSON.stringify(result.results) !== JSON.stringify([0, 2, 4]) || result.attempt !== 2)
          problems.push(`${h.id}: ${JSON.stringify(outcome)}`);
        once(`${h.id} after`, secondPids);
      }
    });
    expect(effects.size).toBe(PARENTS * (1 + CHILDREN) + PARENTS - CANCELLED);
    expect({ problems: problems.length, first: problems.slice(0, 30) }).toEqual({ problems: 0, first: [] });
    const final = await auditNamespace(f.redis, { namespace: f.ns, acknowledged: ids });
    expectConsistent(final);
    expect(final.states).toEqual({
      waiting: 0,
      delayed: 0,
      active: 0,
      completed: (PARENTS - CANCELLED) * (CHILDREN + 1) + CANCELLED,
      failed: 0,
      cancelled: CANCELLED * CHILDREN,
    });
    console.log(
      `durable-waits (c): ${PARENTS} parents × ${CHILDREN} children (${CHILDREN - 1} sleeping ${CHILD_MS} ms); both workers SIGKILLed ${deadlines.first - killedAtRedis} ms before the first child's sleep ended; ` +
        `at rest: ${summary(atRest)}; ${CANCELLED} parents cancelled with no worker (${CANCELLED * (CHILDREN - 1)} children with them); the rest finished by fresh workers`,
    );
  });
});
