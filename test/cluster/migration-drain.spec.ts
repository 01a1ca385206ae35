import 'reflect-metadata';
import Redis from 'ioredis';
import { createApp, redisUrl, type TestApp } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { sluiceConnectionNames } from '../support/client-list';
import { LocalCluster, type MigrateResult, namespaceOnShard, namespaceSlot, startRedisCluster } from '../support/redis-cluster';
import { ClusterWorker } from './cluster-worker';
import { byRun, EFFECT_WORKFLOW, type EffectResult, effectKeys, parseLog } from './effect.workflow';
import { PacedProducer, until } from './paced-producer';

/**
 * A busy namespace's slot is moved to another master mid-drain, by the live resharding protocol
 * in small batches with pauses (migrateSlot({ batch: 50, pauseMs: 20 })), so Sluice's traffic —
 * two worker processes (forked, cluster-worker.process.ts), a producer enqueueing all along and
 * an app waiting for results — keeps hitting the half-moved slot: scripts refused (the slot
 * guard: ASK / TRYAGAIN, nothing runs), then MOVED to the new owner once the slot has moved.
 *
 * Asserts: nothing stranded (every run completes), every run's step executes once and its
 * completion is committed once (counted per run id on the plain server of REDIS_URL), no enqueue
 * fails, the waits resolve with their run's result, the namespace passes the audit on the new
 * owner, and every Sluice connection of the namespace ended on the new owner, none on the old.
 * Reports how long the migration took, how long the drain stalled, how many calls the two nodes
 * refused or redirected (INFO errorstats), and how late the waits saw their results.
 */
const BACKLOG = 2_000;
/** Two worker processes: 20 runs at once in all. */
const WORKERS = 2;
const CONCURRENCY = 10;
/** Each step's simulated work, so the drain lasts long enough to be moved under. */
const STEP_MS = 20;
/** The migration starts once this many runs of the backlog have completed. */
const MOVE_AT = 500;
/** Runs of the backlog (the last ones, still queued when the move starts) whose results an app waits for. */
const WAITED = 200;
/** The producer keeps going until this many of its enqueues sent after the move were acknowledged. */
const AFTER_MOVE = 50;
const PRODUCER = { lanes: 2, pauseMs: 10 };

/** Error replies by kind (INFO errorstats), e.g. { ASK: 12, TRYAGAIN: 40, MOVED: 3 }. */
async function errorStats(conn: Redis): Promise<Record<string, number>> {
  const text = String(await conn.info('errorstats'));
  return Object.fromEntries([...text.matchAll(/^errorstat_(\w+):count=(\d+)/gm)].map(([, kind, count]) => [kind, Number(count)]));
}

/** Per command, the calls Redis rejected before running them (redirects included) and those that failed: INFO commandstats. */
async function refusedCalls(conn: Redis): Promise<Record<string, number>> {
  const text = String(await conn.info('commandstats'));
  const counts: Record<string, number> = {};
  for (const [, cmd, rejected, failed] of text.matchAll(/^cmdstat_(\S+):.*rejected_calls=(\d+),failed_calls=(\d+)/gm)) {
    if (Number(rejected)) counts[`${cmd}:rejected`] = Number(rejected);
    if (Number(failed)) counts[`${cmd}:failed`] = Number(failed);
  }
  return counts;
}

function delta(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.keys(after)
      .map((kind) => [kind, after[kind] - (before[kind] ?? 0)])
      .filter(([, n]) => n !== 0),
  );
}

describe('Redis Cluster: the namespace slot migrated to another master mid-drain', () => {
  let cluster: LocalCluster;
  let effect: Redis;
  const workers: ClusterWorker[] = [];
  const apps: TestApp[] = [];
  const plain: Redis[] = [];
  let producer: PacedProducer | undefined;
  let ns = '';

  beforeAll(async () => {
    // No replicas, so a long node timeout: a node busy migrating must not be flagged failed.
    cluster = await startRedisCluster({ masters: 3, nodeTimeoutMs: 5_000 });
    effect = new Redis(redisUrl());
  });

  afterAll(async () => {
    await producer?.stop();
    await Promise.all(workers.map((w) => w.kill()));
    await Promise.all(apps.map((a) => a.close()));
    plain.forEach((conn) => conn.disconnect());
    if (ns) await effect?.del(...Object.values(effectKeys(ns)));
    await effect?.quit();
    await cluster?.stop();
  });

  it(`moves the slot under ${BACKLOG} runs being drained and more being enqueued: each run completes, its step executed once, on the new owner`, async () => {
    const [source, target] = cluster.nodes.filter((n) => n.role === 'master').map((n) => n.port);
    ns = await namespaceOnShard(cluster, source, 'sluice', 'move');
    const slot = namespaceSlot(ns);
    const keys = effectKeys(ns);
    const seeds = cluster.seeds();
    const connection = { cluster: seeds };
    const onSource = cluster.connect(source);
    const onTarget = cluster.connect(target);
    plain.push(onSource, onTarget);

    const started = Date.now();
    for (let n = 0; n < WORKERS; n++) {
      workers.push(new ClusterWorker({ seeds, namespace: ns, effectUrl: redisUrl(), concurrency: CONCURRENCY, stepMs: STEP_MS }));
    }
    const producerApp = await createApp([], { namespace: ns, connection, worker: { enabled: false } });
    const waiterApp = await createApp([], { namespace: ns, connection, worker: { enabled: false } });
    apps.push(producerApp, waiterApp);
    await Promise.all(workers.map((w) => w.ready()));
    const bootMs = Date.now() - started;

    // The backlog (the workers drain it as it arrives).
    const backlog: string[] = [];
    for (let chunk = 0; chunk < BACKLOG / 500; chunk++) {
      const handles = await producerApp.client.enqueueMany(
        EFFECT_WORKFLOW,
        Array.from({ length: 500 }, (_, j) => ({ input: { i: chunk * 500 + j }, opts: { id: `backlog-${chunk * 500 + j}` } })),
      );
      expect(handles.every((h) => h.created)).toBe(true);
      backlog.push(...handles.map((h) => h.id));
    }
    await until(`${MOVE_AT} runs to complete`, 30_000, async () => ({
      done: (await effect.hlen(keys.commits)) >= MOVE_AT,
      state: await effect.hlen(keys.commits),
    }));

    // Waits for the last runs of the backlog, still queued: they complete after the move.
    const waited = backlog.slice(-WAITED);
    expect(await effect.hmget(keys.commits, ...waited)).toEqual(waited.map(() => null));
    const waitedAt = new Map<string, number>();
    const waits = Promise.all(
      waited.map((id) =>
        waiterApp.client.wait<EffectResult>(id, { timeoutMs: 40_000 }).then((result) => {
          waitedAt.set(id, Date.now());
          return result;
        }),
      ),
    );
    waits.catch(() => undefined); // awaited below

    // The move, with the producer enqueueing throughout.
    producer = new PacedProducer(producerApp.client, ns, PRODUCER);
    producer.start();
    const statsBefore = await Promise.all([errorStats(onSource), errorStats(onTarget)]);
    const callsBefore = await Promise.all([refusedCalls(onSource), refusedCalls(onTarget)]);
    const completedAtStart = await effect.hlen(keys.commits);
    let completedAtFirstBatch = -1;
    let completedAtLastBatch = -1;
    const moveStarted = Date.now();
    const result: MigrateResult = await cluster.migrateSlot(slot, target, {
      batch: 50,
      pauseMs: 20,
      onBatch: async (progress) => {
        const completed = await effect.hlen(keys.commits);
        if (progress.batch === 1) completedAtFirstBatch = completed;
        completedAtLastBatch = completed;
      },
    });
    const movedAt = Date.now();
    const statsAfterMove = await Promise.all([errorStats(onSource), errorStats(onTarget)]);
    const callsAfterMove = await Promise.all([refusedCalls(onSource), refusedCalls(onTarget)]);
    expect(result).toMatchObject({ slot, from: source, to: target });
    expect(result.batches).toBeGreaterThan(10); // the slot really was half-moved for a while
    expect(await cluster.masterOf(slot)).toBe(target);
    // Work was pending when the move began and still is: the move happened mid-drain.
    expect(completedAtStart).toBeLessThan(BACKLOG);
    const midDrain = await effect.hlen(keys.commits);
    expect(midDrain).toBeLessThan(BACKLOG);

    // The producer goes on after the move, then stops; every enqueue it made was acknowledged.
    await until(
      `${AFTER_MOVE} enqueues sent after the move to be acknowledged`,
      20_000,
      async () => producer!.acked.filter((a) => a.sentAt > movedAt).length >= AFTER_MOVE,
    );
    await producer.stop();
    expect(producer.failed).toEqual([]);
    // Its calls did hit the half-moved slot: some were sent before the move ended and answered after it began.
    const inFlightDuringMove = producer.attempts.filter((a) => a.sentAt < movedAt && a.ackAt! > moveStarted).length;
    expect(inFlightDuringMove).toBeGreaterThan(0);
    const all = [...backlog, ...producer.attempts.map((a) => a.id)];

    // Nothing stranded: every run completes.
    await until('every run to complete', 40_000, async () => {
      const commits = await effect.hgetall(keys.commits);
      const pending = all.filter((id) => !commits[id]);
      return { done: pending.length === 0, state: { pending: pending.length, first: pending.slice(0, 5) } };
    });
    const drainedAt = Date.now();
    const results = await waits;
    expect(results).toEqual(waited.map((id) => ({ i: Number(id.slice('backlog-'.length)), n: 1 })));

    // Every Sluice connection of the namespace is on the new owner, none left on the old one:
    // per worker process command, blocking and subscriber; the producer's command; the waiter's
    // command and subscriber.
    const expected = [
      ...Array.from({ length: WORKERS + 2 }, () => `sluice:${ns}:command`),
      ...Array.from({ length: WORKERS }, () => `sluice:${ns}:blocking`),
      ...Array.from({ length: WORKERS + 1 }, () => `sluice:${ns}:subscriber`),
    ].sort();
    let names: { source: string[]; target: string[] } = { source: [], target: [] };
    await until('the connections to settle on the new owner', 10_000, async () => {
      names = { source: await sluiceConnectionNames(onSource, ns), target: await sluiceConnectionNames(onTarget, ns) };
      return { done: names.source.length === 0 && JSON.stringify(names.target) === JSON.stringify(expected), state: names };
    });
    expect(names).toEqual({ source: [], target: expected });
    // The namespace's keys all moved with the slot.
    expect(await onSource.cluster('COUNTKEYSINSLOT', slot)).toBe(0);

    for (const worker of workers) expect(await worker.stop()).toMatchObject({ code: 0, signal: null });

    // Exactly once, per run id: one execution of the step, one committed completion.
    const [exec, commits] = await Promise.all([effect.hgetall(keys.exec), effect.hgetall(keys.commits)]);
    const other = await effect.lrange(keys.otherLog, 0, -1);
    const problems: string[] = [];
    for (const id of all) {
      if (exec[id] !== '1') problems.push(`${id}: step executed ${exec[id] ?? 0} times`);
      if (commits[id] !== '1') problems.push(`${id}: completed ${commits[id] ?? 0} times`);
    }
    expect(Object.keys(exec).length).toBe(all.length);
    expect({ count: problems.length, first: problems.slice(0, 20) }).toEqual({ count: 0, first: [] });
    expect(other).toEqual([]); // no stall, no failed attempt

    const report = await auditNamespace(onTarget, { namespace: ns, acknowledged: all });
    expectConsistent(report);
    expect(report.states).toEqual({ waiting: 0, delayed: 0, active: 0, completed: all.length, failed: 0, cancelled: 0 });
    // The audit reads the same through an ioredis Cluster client (it scans every master, routes the MULTI to the slot's owner).
    const viaCluster = cluster.client();
    try {
      expect(await auditNamespace(viaCluster as unknown as Redis, { namespace: ns, acknowledged: all })).toEqual(report);
    } finally {
      await viaCluster.quit();
    }

    // Measurements.
    const commitLog = parseLog(await effect.lrange(keys.commitLog, 0, -1));
    const commitTimes = commitLog.map((e) => e.at).sort((a, b) => a - b);
    const inMove = commitTimes.filter((t) => t > moveStarted && t < movedAt).length;
    const times = [moveStarted, ...commitTimes.filter((t) => t > moveStarted)];
    const longestGap = Math.max(...times.slice(1).map((t, i) => t - times[i]));
    const firstAfter = commitTimes.find((t) => t > movedAt);
    const commitAt = new Map([...byRun(commitLog)].map(([id, entries]) => [id, entries[0].at]));
    const lateness = waited.map((id) => waitedAt.get(id)! - commitAt.get(id)!).sort((a, b) => a - b);
    const sourceRefused = delta(statsAfterMove[0], statsBefore[0]);
    const targetRefused = delta(statsAfterMove[1], statsBefore[1]);
    const [sourceEnd, targetEnd] = await Promise.all([errorStats(onSource), errorStats(onTarget)]);
    const [sourceCallsEnd, targetCallsEnd] = await Promise.all([refusedCalls(onSource), refusedCalls(onTarget)]);
    console.log(
      [
        `migration-drain: workers booted in ${bootMs} ms; ${all.length} runs (${BACKLOG} backlog + ${all.length - BACKLOG} enqueued during and after the move), ${WORKERS}×${CONCURRENCY} concurrency`,
        `move of slot ${slot} ${source} → ${target}: ${movedAt - moveStarted} ms, ${result.moved} keys in ${result.batches} batches; started with ${completedAtStart} runs completed ` +
          `(${completedAtFirstBatch} at the first batch, ${completedAtLastBatch} at the last: ${completedAtLastBatch - completedAtFirstBatch} while half-moved); ` +
          `${inMove} completions between the move's start and its end; ` +
          `longest gap between completions ${longestGap} ms; first completion after the move at +${firstAfter === undefined ? '?' : firstAfter - movedAt} ms; drained at +${drainedAt - movedAt} ms`,
        `refused/redirected during the move (INFO errorstats deltas): source ${JSON.stringify(sourceRefused)}, target ${JSON.stringify(targetRefused)}; ` +
          `after the move to the end: source ${JSON.stringify(delta(sourceEnd, statsAfterMove[0]))}, target ${JSON.stringify(delta(targetEnd, statsAfterMove[1]))}`,
        `per command (INFO commandstats rejected/failed deltas) during the move: source ${JSON.stringify(delta(callsAfterMove[0], callsBefore[0]))}, target ${JSON.stringify(delta(callsAfterMove[1], callsBefore[1]))}; ` +
          `after: source ${JSON.stringify(delta(sourceCallsEnd, callsAfterMove[0]))}, target ${JSON.stringify(delta(targetCallsEnd, callsAfterMove[1]))}`,
        `producer: ${producer.attempts.length} enqueues, ${inFlightDuringMove} of them in flight during the move, ` +
          `slowest ${Math.max(...producer.attempts.map((a) => a.ackAt! - a.sentAt))} ms`,
        `waits: ${WAITED} results seen after their completion by median ${lateness[lateness.length >> 1]} ms, p90 ${lateness[Math.floor(lateness.length * 0.9)]} ms, max ${lateness[lateness.length - 1]} ms`,
      ].join('\n'),
    );
  });
});
