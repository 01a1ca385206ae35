import Redis from 'ioredis';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, redisUrl, TestApp, uniqueNamespace } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { attemptByKey, commitsKey, despiteMemoKey, execByKey, execCountKey, ThreeStepWorkflow } from './chaos.workflows';
import { ChildWorker } from './child-worker';

/**
 * Four worker processes drain a backlog of three-step runs while random workers are SIGKILLed
 * and replaced. Nothing may be lost, each result is committed once, and a step executes again
 * only where a kill fell between its side effect and its memo write.
 *
 * Each step execution records (atomically with its side-effect counter) which process made it,
 * and each attempt records which process started it before any step: so the test knows, per step,
 * which execution's memo landed (the run's result carries it) and which ones were lost, and
 * whether the process that lost them is one it killed. CHAOS_SEED=<n> replays a victim order.
 */
jest.setTimeout(240_000);

const RUNS = 5_000;
const PROCESSES = 4;
/** Kills, each when this fraction of the runs has finished. */
const KILL_AT = [0.06, 0.16, 0.27, 0.38, 0.5, 0.62, 0.74, 0.86];
/**
 * Leases of 3 s (heartbeat every second), a stalled scan every 0.5 s: a killed worker's runs are
 * recovered within ~3.5 s, while a live worker on a busy 2-core machine keeps its leases (its
 * event loop would have to stall for 2 s to lose one, which the test would report as a live
 * process's attempt that did not finish).
 */
const CHILD_ENV = { MODE: 'three-step', CONCURRENCY: '25', LOCK_MS: '3000', STALLED_INTERVAL_MS: '500' };
const STEPS = ['a', 'b', 'c'] as const;
const WF = 'chaos.three-step';

/** mulberry32: a small seeded PRNG, so a failing victim order can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('worker processes SIGKILLed and restarted during a drain', () => {
  const ns = uniqueNamespace('killrestart');
  const keys = new RedisKeys('sluice', ns);
  const seed = Number(process.env.CHAOS_SEED ?? Date.now() % 1_000_000);
  const random = prng(seed);
  let redis: Redis;
  let producer: TestApp;
  const children: ChildWorker[] = [];
  const ready = new Set<ChildWorker>();

  beforeAll(async () => {
    redis = rawRedis();
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
  });

  afterAll(async () => {
    await Promise.all(children.map((child) => child.kill()));
    await producer?.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  const spawn = () => {
    const child = new ChildWorker({ REDIS_URL: redisUrl(), NS: ns, ...CHILD_ENV });
    children.push(child);
    child
      .waitFor((m) => m.ready === true, 'ready', 120_000)
      .then(
        () => ready.add(child),
        () => undefined,
      );
    return child;
  };

  it(`loses nothing and re-executes a step only where a kill fell between its side effect and its memo write (${RUNS} runs)`, async () => {
    const handles = await producer.client.enqueueMany(
      ThreeStepWorkflow,
      Array.from({ length: RUNS }, (_, i) => ({ input: { i } })),
    );
    expect(handles.every((h) => h.created)).toBe(true);
    const ids = handles.map((h) => h.id);

    // Each kill when its share of the runs has finished (a result arriving is the event).
    const killed: { pid: number; atFinished: number }[] = [];
    const live = new Set<ChildWorker>();
    let finished = 0;
    let nextKill = 0;
    let killing: Promise<void> = Promise.resolve();
    const killOne = async (atFinished: number) => {
      // Prefer a worker that is running runs (has reported ready): a kill of one still booting proves little.
      const candidates = [...live];
      const booted = candidates.filter((c) => ready.has(c));
      const pool = booted.length > 0 ? booted : candidates;
      const victim = pool[Math.floor(random() * pool.length)];
      live.delete(victim);
      const pid = victim.pid;
      victim.proc.kill('SIGKILL');
      expect(await victim.exited).toEqual({ code: null, signal: 'SIGKILL' });
      killed.push({ pid, atFinished });
      live.add(spawn());
    };
    const results = Promise.all(
      handles.map((h) =>
        h.result({ timeoutMs: 200_000 }).then((result) => {
          finished++;
          while (nextKill < KILL_AT.length && finished >= KILL_AT[nextKill] * RUNS) {
            nextKill++;
            const at = finished;
            killing = killing.then(() => killOne(at));
          }
          return result;
        }),
      ),
    );

    for (let n = 0; n < PROCESSES; n++) live.add(spawn());
    const settled = await results;
    await killing;
    expect(killed).toHaveLength(KILL_AT.length);

    // Every live worker stops cleanly. A replacement may still be booting: wait for it to listen.
    await Promise.all([...live].map((child) => child.waitFor((m) => m.ready === true, 'ready', 60_000)));
    const stops = await Promise.all([...live].map((child) => child.stop(60_000)));
    for (const stop of stops) expect({ code: stop.code, signal: stop.signal }).toEqual({ code: 0, signal: null });

    // 0 lost: every run completed with its own result; the namespace is consistent.
    expect(settled.map((r) => r.i)).toEqual(handles.map((_, i) => i));
    const report = await auditNamespace(redis, { namespace: ns, acknowledged: ids });
    expectConsistent(report);
    expect(report.states).toEqual({ waiting: 0, delayed: 0, active: 0, completed: RUNS, failed: 0, cancelled: 0 });
    // Committed once: the commit script's own tally counts each successful commit (audit rule `stats`).
    expect(report.workflows[WF].stats.completed).toBe(RUNS);

    const [execCount, execBy, attemptBy, commits, despiteMemo] = await Promise.all(
      [execCountKey(ns), execByKey(ns), attemptByKey(ns), commitsKey(ns), despiteMemoKey(ns)].map((key) => redis.hgetall(key)),
    );
    // No step executed while its memo was in the run record: every re-execution is one whose
    // memo write never landed.
    expect(despiteMemo).toEqual({});
    const pipeline = redis.pipeline();
    ids.forEach((id) => pipeline.hmget(keys.run(id), 'attempts', 'stalls', 'failures'));
    const rows = ((await pipeline.exec()) ?? []).map(([error, row]) => {
      if (error) throw error;
      return (row as string[]).map(Number);
    });

    const killedPids = new Set(killed.map((k) => String(k.pid)));
    const attemptPids = new Map<string, Map<number, string>>(); // run id → attempt → pid that started it
    for (const [key, pid] of Object.entries(attemptBy)) {
      const id = key.slice(0, key.lastIndexOf('#'));
      if (!attemptPids.has(id)) attemptPids.set(id, new Map());
      attemptPids.get(id)!.set(Number(key.slice(key.lastIndexOf('#') + 1)), pid);
    }
    const problems: string[] = [];
    const onKilled = new Set<string>(); // runs a killed process had in flight: an attempt it started (or claimed) and never finished
    let claimedByTheDead = 0; // attempts claimed by a process killed before it could start them
    let reExecuted = 0;
    ids.forEach((id, index) => {
      const result = settled[index];
      const [attemptsField, stalls, failures] = rows[index];
      const started = attemptPids.get(id) ?? new Map<number, string>();
      // The last attempt completed the run: it was started, by the process the result names.
      if (result.attempt !== attemptsField || started.get(attemptsField) !== String(result.by)) {
        problems.push(
          `${id}: result of attempt ${result.attempt} by ${result.by}, but ${attemptsField} attempts, the last started by ${started.get(attemptsField)}`,
        );
      }
      // Every earlier attempt was cut short, and only a kill may have cut it.
      const cutShort = new Set<string>();
      for (let attempt = 1; attempt < attemptsField; attempt++) {
        const pid = started.get(attempt);
        if (pid === undefined) {
          // Claimed (by a reserve or a complete's refill) but never started: the claiming process
          // died between the claim and its first write, its claim reply lost with it.
          claimedByTheDead++;
        } else if (!killedPids.has(pid)) {
          problems.push(`${id}: attempt ${attempt} by live process ${pid} did not finish the run`);
        } else cutShort.add(pid);
        onKilled.add(id);
      }
      for (const step of STEPS) {
        const count = Number(execCount[`${id}:${step}`] ?? 0);
        const memo = result[step];
        if (execBy[`${id}:${step}#${memo.n}`] !== String(memo.pid)) {
          problems.push(
            `${id}:${step}: the memo says execution #${memo.n} by ${memo.pid}, the record says ${execBy[`${id}:${step}#${memo.n}`]}`,
          );
        }
        if (count > 1) reExecuted++;
        for (let n = 1; n <= count; n++) {
          // An execution whose memo did not land (see despiteMemo) must have been cut short by a kill.
          if (n !== memo.n && !cutShort.has(execBy[`${id}:${step}#${n}`])) {
            problems.push(
              `${id}:${step}: execution #${n} of ${count} by ${execBy[`${id}:${step}#${n}`]}, not a killed process that had the run in flight, lost its memo (memo: #${memo.n})`,
            );
          }
        }
      }
      // Each attempt after the first is a recovery from a stall (nothing failed).
      if (stalls !== attemptsField - 1 || failures !== 0)
        problems.push(`${id}: ${attemptsField} attempts, ${stalls} stalls, ${failures} failures`);
      // The commit event: exactly one, unless the committing process was killed before counting it.
      const commitEvents = Number(commits[id] ?? 0);
      if (commitEvents > 1 || (commitEvents === 0 && !killedPids.has(String(result.by)))) {
        problems.push(
          `${id}: ${commitEvents} commit event(s), committed by ${result.by}${killedPids.has(String(result.by)) ? ' (killed)' : ''}`,
        );
      }
    });
    expect({ problems: problems.length, first: problems.slice(0, 40) }).toEqual({ problems: 0, first: [] });
    // The faults really hit runs in flight.
    expect(onKilled.size).toBeGreaterThan(0);

    console.log(
      `kill-restart (seed ${seed}): ${RUNS} runs, ${killed.length} kills at ${killed.map((k) => k.atFinished).join('/')} finished; ` +
        `${onKilled.size} runs had an attempt on a killed worker (${claimedByTheDead} claimed but not yet started); ` +
        `${reExecuted} step(s) executed more than once, each time by a killed worker`,
    );
  });
});
