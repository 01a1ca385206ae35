import 'reflect-metadata';
import Redis from 'ioredis';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, redisUrl, type TestApp } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { LocalCluster, namespaceOnShard, namespaceSlot, startRedisCluster } from '../support/redis-cluster';
import { ClusterWorker } from './cluster-worker';
import { byRun, effectKeys, type LogEntry, parseLog } from './effect.workflow';
import { type Attempt, PacedProducer, until } from './paced-producer';

/**
 * A master of a 3-master, 3-replica cluster is SIGKILLed under load. Two namespaces live on
 * different shards, each with a worker in its own OS process (forked: cluster-worker.process.ts)
 * and a producer in this process (an app with its worker disabled) enqueueing all along.
 *
 * - B, whose master lives, keeps completing runs while A has no master (measured, with the
 *   window in which B's own master reports cluster_state:fail — see FULL_COVERAGE).
 * - After the failover, A resumes on the promoted replica: every run of A that exists completes,
 *   and its step executes and its completion is committed once — except where a write the old
 *   master had acknowledged never reached the replica (Redis replicates asynchronously): such an
 *   enqueue is lost, such a claim or memo write makes the step execute again. Those are counted
 *   and reported apart, and allowed only for writes acknowledged before the replica took over.
 * - Both namespaces pass the consistency audit (on a plain connection to the owning master).
 *
 * Run twice, each on a cluster of its own: with Redis's default cluster-require-full-coverage yes,
 * every node refuses every command (CLUSTERDOWN) from the moment A's master is flagged FAIL until
 * its replica is promoted, so B stalls for that window too (Sluice re-sends what was refused: B
 * must still execute and complete each run once; the stall is measured and reported). With
 * cluster-require-full-coverage no (set by CONFIG SET on every node: the cluster helper takes no
 * extra server arguments) B's shard never goes down, and B must not stall at all.
 */
/** cluster-node-timeout: a failover takes about this plus an election (0.5–1.5 s). */
const NODE_TIMEOUT_MS = 1_000;
/** Longer than the outage: leases are not lost to it, and commits are retried across it (commitPolicy: up to lockMs). */
const LOCK_MS = 10_000;
/** Both namespaces complete this many runs before the kill. */
const WARMUP_RUNS = 150;
/** A completes this many runs enqueued after the failover before the producers stop. */
const AFTER_RUNS = 100;
const PRODUCER = { lanes: 3, pauseMs: 15 };
/**
 * How long before the kill a write acknowledged by the old master may still have been missing on
 * its replica (replication is asynchronous, but on loopback it lags by milliseconds; a claim's step executes
 * as soon as its reply arrives): a step
 * executed earlier had its memo write replicated, so executing it again would be a bug.
 */
const REPLICATION_LAG_BOUND_MS = 250;
/** Each step's simulated work: with the producers' pace, several runs are mid-step at any moment, the kill's included. */
const STEP_MS = 50;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Sample {
  at: number;
  /** B's master: cluster_state:ok. */
  clusterOk: boolean;
  /** The replica of A's master answers ROLE master. */
  promoted: boolean;
}

describe.each(['yes', 'no'] as const)(
  'Redis Cluster: a master SIGKILLed under load, failed over (cluster-require-full-coverage %s)',
  (FULL_COVERAGE) => {
    let cluster: LocalCluster;
    let effect: Redis;
    const workers: ClusterWorker[] = [];
    const apps: TestApp[] = [];
    const producers: PacedProducer[] = [];
    const plain: Redis[] = [];
    const namespaces: string[] = [];

    beforeAll(async () => {
      cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: NODE_TIMEOUT_MS });
      if (FULL_COVERAGE === 'no') {
        for (const node of cluster.nodes) {
          const conn = cluster.connect(node.port);
          await conn.config('SET', 'cluster-require-full-coverage', 'no');
          conn.disconnect();
        }
      }
      effect = new Redis(redisUrl());
    });

    afterAll(async () => {
      await Promise.all(producers.map((p) => p.stop()));
      await Promise.all(workers.map((w) => w.kill()));
      await Promise.all(apps.map((a) => a.close()));
      plain.forEach((conn) => conn.disconnect());
      for (const ns of namespaces) await effect?.del(...Object.values(effectKeys(ns)));
      await effect?.quit();
      await cluster?.stop();
    });

    const connect = (port: number) => {
      const conn = cluster.connect(port, { maxRetriesPerRequest: 1, retryStrategy: () => null });
      conn.on('error', () => undefined);
      plain.push(conn);
      return conn;
    };

    it("B keeps completing runs during A's outage; A resumes on the promoted replica, each run completing once but for writes lost to asynchronous replication", async () => {
      const masters = cluster.nodes.filter((n) => n.role === 'master');
      const [nodeA, nodeB] = masters;
      const replicaA = cluster.nodes.find((n) => n.masterId === nodeA.id)!;
      const nsA = await namespaceOnShard(cluster, nodeA.port, 'sluice', 'fo-a');
      const nsB = await namespaceOnShard(cluster, nodeB.port, 'sluice', 'fo-b');
      namespaces.push(nsA, nsB);
      const keysA = effectKeys(nsA);
      const keysB = effectKeys(nsB);
      const seeds = cluster.seeds();
      const connection = { cluster: seeds };

      const started = Date.now();
      for (const namespace of [nsA, nsB]) {
        workers.push(
          new ClusterWorker({
            seeds,
            namespace,
            effectUrl: redisUrl(),
            concurrency: 20,
            lockMs: LOCK_MS,
            stalledIntervalMs: 1_000,
            stepMs: STEP_MS,
          }),
        );
      }
      for (const namespace of [nsA, nsB]) apps.push(await createApp([], { namespace, connection, worker: { enabled: false } }));
      await Promise.all(workers.map((w) => w.ready()));
      const bootMs = Date.now() - started;
      const [producerA, producerB] = [nsA, nsB].map((ns, i) => new PacedProducer(apps[i].client, ns, PRODUCER));
      producers.push(producerA, producerB);
      producerA.start();
      producerB.start();
      const producingAt = Date.now();

      // Both make progress.
      await until(`both namespaces to complete ${WARMUP_RUNS} runs`, 20_000, async () => {
        const [a, b] = await Promise.all([effect.llen(keysA.commitLog), effect.llen(keysB.commitLog)]);
        return { done: a >= WARMUP_RUNS && b >= WARMUP_RUNS, state: { a, b } };
      });

      // Watch B's master's cluster_state and A's replica's role through the outage (measurements).
      const watchB = connect(nodeB.port);
      const watchReplica = connect(replicaA.port);
      const samples: Sample[] = [];
      let watching = true;
      const watcher = (async () => {
        while (watching) {
          const [info, role] = await Promise.all([
            watchB.call('CLUSTER', 'INFO') as Promise<string>,
            watchReplica.call('ROLE') as Promise<unknown[]>,
          ]);
          samples.push({ at: Date.now(), clusterOk: info.includes('cluster_state:ok'), promoted: role[0] === 'master' });
          await sleep(20);
        }
      })();

      const killSentAt = Date.now();
      await cluster.kill(nodeA.port);
      const killedAt = Date.now();
      const promotedPort = await cluster.waitForFailover(nodeA.port, 30_000);
      const failoverAt = Date.now();
      watching = false;
      await watcher;
      expect(promotedPort).toBe(replicaA.port);
      // Every sample before the promotion was seen says replica: acknowledgements until then came from the old master.
      const replicaUntil = Math.max(...samples.filter((s) => !s.promoted).map((s) => s.at));
      const promotedSeenAt = Math.min(...samples.filter((s) => s.promoted).map((s) => s.at));
      expect(replicaUntil).toBeGreaterThanOrEqual(killedAt);
      expect(promotedSeenAt).toBeGreaterThan(replicaUntil);

      // A resumes: runs enqueued after the failover complete on the promoted replica.
      await until(`A to complete ${AFTER_RUNS} runs enqueued after the failover`, 20_000, async () => {
        const late = producerA.acked.filter((a) => a.sentAt > failoverAt).map((a) => a.id);
        const commits = late.length ? await effect.hmget(keysA.commits, ...late) : [];
        const done = commits.filter((c) => c !== null).length;
        return { done: done >= AFTER_RUNS, state: { late: late.length, done } };
      });
      await Promise.all([producerA.stop(), producerB.stop()]);

      // Which of A's runs exist on the promoted master (B's: on its master, untouched).
      const onA = connect(promotedPort);
      const onB = connect(nodeB.port);
      const existing = async (conn: Redis, ns: string, attempts: Attempt[]) => {
        const keys = new RedisKeys('sluice', ns);
        const pipeline = conn.pipeline();
        attempts.forEach((a) => pipeline.exists(keys.run(a.id)));
        const replies = (await pipeline.exec()) ?? [];
        return new Set(attempts.filter((_, i) => replies[i][1] === 1).map((a) => a.id));
      };
      const existsA = await existing(onA, nsA, producerA.attempts);
      const existsB = await existing(onB, nsB, producerB.attempts);

      // Every run that exists completes (its completion committed and reported by the worker).
      await until('every existing run of A and B to complete', 30_000, async () => {
        const [commitsA, commitsB] = await Promise.all([effect.hgetall(keysA.commits), effect.hgetall(keysB.commits)]);
        const pendingA = [...existsA].filter((id) => !commitsA[id]).length;
        const pendingB = [...existsB].filter((id) => !commitsB[id]).length;
        return { done: pendingA === 0 && pendingB === 0, state: { pendingA, pendingB } };
      });
      const drainedAt = Date.now();
      for (const worker of workers) expect(await worker.stop()).toMatchObject({ code: 0, signal: null });

      // The topology: only A's shard failed over (no spurious failover of B's master under load).
      expect(await cluster.masterOf(namespaceSlot(nsA))).toBe(promotedPort);
      expect(await cluster.masterOf(namespaceSlot(nsB))).toBe(nodeB.port);

      const [execA, execB, commitsB] = await Promise.all([keysA.exec, keysB.exec, keysB.commits].map((key) => effect.hgetall(key)));
      const [execLogA, commitLogA, commitLogB] = (
        await Promise.all([keysA.execLog, keysA.commitLog, keysB.commitLog].map((key) => effect.lrange(key, 0, -1)))
      ).map(parseLog);
      const [otherA, otherB] = await Promise.all([effect.lrange(keysA.otherLog, 0, -1), effect.lrange(keysB.otherLog, 0, -1)]);

      // ---- B: untouched by the fault but for the cluster-wide CLUSTERDOWN: strictly exactly once.
      expect(producerB.failed).toEqual([]);
      expect(existsB.size).toBe(producerB.attempts.length);
      const problemsB: string[] = [];
      for (const { id } of producerB.attempts) {
        if (execB[id] !== '1') problemsB.push(`${id}: step executed ${execB[id] ?? 0} times`);
        if (commitsB[id] !== '1') problemsB.push(`${id}: completed ${commitsB[id] ?? 0} times`);
      }
      expect({ count: problemsB.length, first: problemsB.slice(0, 20) }).toEqual({ count: 0, first: [] });
      expect(otherB).toEqual([]);
      const reportB = await auditNamespace(onB, { namespace: nsB, acknowledged: producerB.attempts.map((a) => a.id) });
      expectConsistent(reportB);
      expect(reportB.states).toEqual({ waiting: 0, delayed: 0, active: 0, completed: producerB.attempts.length, failed: 0, cancelled: 0 });

      // B completed runs while A had no master (from the kill until its replica was seen promoted).
      const inWindow = (entries: LogEntry[], from: number, to: number) => entries.filter((e) => e.at > from && e.at < to);
      const bDuringOutage = inWindow(commitLogB, killSentAt, promotedSeenAt);
      expect(bDuringOutage.length).toBeGreaterThan(0);
      const failSamples = samples.filter((s) => !s.clusterOk);
      const failWindow = failSamples.length ? { from: failSamples[0].at, to: failSamples[failSamples.length - 1].at } : undefined;
      const bDuringFail = failWindow ? inWindow(commitLogB, failWindow.from, failWindow.to).length : 0;
      const gaps = (entries: LogEntry[], from: number, to: number) => {
        const times = [
          from,
          ...entries
            .filter((e) => e.at > from && e.at < to)
            .map((e) => e.at)
            .sort((x, y) => x - y),
          to,
        ];
        return Math.max(...times.slice(1).map((t, i) => t - times[i]));
      };
      const longestGapB = gaps(commitLogB, killSentAt, failoverAt + 1_000);
      const longestGapBBefore = gaps(commitLogB, producingAt + 500, killSentAt);
      // After its master says cluster_state:ok again, B resumes (Sluice re-sends refused calls every 100 ms).
      const bResumedAfter = failWindow ? Math.min(...commitLogB.filter((e) => e.at > failWindow.to).map((e) => e.at)) - failWindow.to : 0;
      if (FULL_COVERAGE === 'no') {
        // B's shard never went down: it kept completing runs throughout (a gap of a second would be a stall).
        expect(failWindow).toBeUndefined();
        expect(longestGapB).toBeLessThan(1_000);
      } else {
        // Redis refused everything for a while (the premise of this variant), B stalled no longer than that plus a second.
        expect(failWindow).toBeDefined();
        expect(bResumedAfter).toBeLessThan(1_000);
        expect(longestGapB).toBeLessThan(failWindow!.to - failWindow!.from + 1_000);
      }

      // ---- A: what the promoted replica lacks, and every run it has.
      const existingA = producerA.attempts.filter((a) => existsA.has(a.id));
      const missingAcked = producerA.acked.filter((a) => !existsA.has(a.id));
      // Acknowledged by the old master just before it died (before the replica was promoted) and
      // missing: lost to asynchronous replication. Acknowledged earlier, or by the promoted master,
      // and missing: a bug.
      const lostByReplication = missingAcked.filter((a) => a.ackAt! >= killSentAt - REPLICATION_LAG_BOUND_MS && a.ackAt! <= replicaUntil);
      expect(
        missingAcked.filter((a) => !lostByReplication.includes(a)).map((a) => `${a.id} acked at kill${sign(a.ackAt! - killSentAt)} ms`),
      ).toEqual([]);
      expect(producerA.acked.filter((a) => a.ackAt! < killSentAt).length).toBeGreaterThan(0);
      expect(producerA.acked.filter((a) => a.sentAt > failoverAt).length).toBeGreaterThanOrEqual(AFTER_RUNS);

      const execsA = byRun(execLogA);
      const commitEventsA = byRun(commitLogA);
      const problemsA: string[] = [];
      const reExecuted: string[] = [];
      const recommitted: string[] = [];
      for (const { id } of existingA) {
        const execs = execsA.get(id) ?? [];
        const commits = commitEventsA.get(id) ?? [];
        if (Number(execA[id] ?? 0) !== execs.length) problemsA.push(`${id}: exec counter ${execA[id]} ≠ ${execs.length} logged`);
        if (execs.length === 0) problemsA.push(`${id}: completed without executing its step`);
        if (commits.length === 0) problemsA.push(`${id}: never completed`);
        // A second execution (or completion) only where the first was made under a claim (or
        // acknowledged) by the old master just before it died, its write not yet replicated.
        const lostWithOldMaster = (twice: LogEntry[]) =>
          twice.length === 2 &&
          twice[0].at >= killSentAt - REPLICATION_LAG_BOUND_MS &&
          twice[0].at <= replicaUntil &&
          twice[1].at > killSentAt;
        const show = (twice: LogEntry[]) =>
          `attempts ${twice.map((e) => e.attempt).join(',')} at kill${twice.map((e) => sign(e.at - killSentAt)).join('/')} ms`;
        if (execs.length > 1) {
          if (lostWithOldMaster(execs)) reExecuted.push(`${id} (${show(execs)})`);
          else problemsA.push(`${id}: step executed ${execs.length} times (${show(execs)})`);
        }
        if (commits.length > 1) {
          if (lostWithOldMaster(commits)) recommitted.push(`${id} (${show(commits)})`);
          else problemsA.push(`${id}: completed ${commits.length} times (${show(commits)})`);
        }
      }
      // Runs that executed but do not exist: only runs lost with the old master.
      const lostIds = new Set(lostByReplication.map((a) => a.id));
      const unknownOutcome = new Set(producerA.failed.filter((a) => a.error !== 'RedisUnavailableError').map((a) => a.id));
      for (const id of execsA.keys()) {
        if (!existsA.has(id) && !lostIds.has(id) && !unknownOutcome.has(id))
          problemsA.push(`${id}: executed, but neither exists nor was lost with the old master`);
      }
      expect({ count: problemsA.length, first: problemsA.slice(0, 20) }).toEqual({ count: 0, first: [] });
      // Nothing failed: the outage is shorter than every bound (redisTimeoutMs 10 s for enqueues, lockMs for commits).
      expect(otherA.filter((line) => line.startsWith('failed '))).toEqual([]);
      expect(producerA.failed).toEqual([]);

      // The kill hit runs in flight: their step executed under the old master, their completion came after.
      const inFlightAtKill = existingA.filter(
        ({ id }) => (execsA.get(id)?.[0]?.at ?? Infinity) < killSentAt && (commitEventsA.get(id)?.[0]?.at ?? 0) > killedAt,
      );
      expect(inFlightAtKill.length).toBeGreaterThan(0);
      const backlogAtKill = existingA.filter(
        ({ id }) =>
          (producerA.acked.find((a) => a.id === id)?.ackAt ?? Infinity) < killSentAt &&
          !((execsA.get(id)?.[0]?.at ?? Infinity) < killSentAt),
      );

      const reportA = await auditNamespace(onA, { namespace: nsA, acknowledged: existingA.map((a) => a.id) });
      expectConsistent(reportA);
      expect(reportA.states).toEqual({ waiting: 0, delayed: 0, active: 0, completed: existingA.length, failed: 0, cancelled: 0 });

      const firstAAfterKill = commitLogA
        .filter((e) => e.at > killedAt)
        .map((e) => e.at)
        .sort((x, y) => x - y)[0];
      console.log(
        [
          `failover (cluster-require-full-coverage ${FULL_COVERAGE}, node timeout ${NODE_TIMEOUT_MS} ms): workers booted in ${bootMs} ms; ` +
            `kill → replica promoted (seen) ${promotedSeenAt - killSentAt} ms, → waitForFailover ${failoverAt - killSentAt} ms, → drained ${drainedAt - killSentAt} ms`,
          `A: ${producerA.attempts.length} enqueues (${producerA.acked.filter((a) => a.ackAt! < killSentAt).length} acknowledged before the kill, ` +
            `${producerA.acked.filter((a) => a.sentAt > failoverAt).length} sent after the failover, ${producerA.acked.filter((a) => a.created === false).length} acknowledged as existing after a retry), ` +
            `${existingA.length} runs on the promoted master, all completed; at the kill ${inFlightAtKill.length} were mid-step and ${backlogAtKill.length} queued; ` +
            `first completion after the kill at +${firstAAfterKill - killSentAt} ms`,
          `A: lost by asynchronous replication: ${lostByReplication.length} acknowledged enqueue(s) ${JSON.stringify(lostByReplication.map((a) => `${a.id} acked at kill${sign(a.ackAt! - killSentAt)} ms`))}; ` +
            `${lostByReplication.filter((a) => execsA.has(a.id)).length} of them had executed on the old master`,
          `A: step executed again after a claim/memo lost with the old master: ${reExecuted.length} ${JSON.stringify(reExecuted)}; completed twice: ${recommitted.length} ${JSON.stringify(recommitted)}`,
          `A: stalls/failures reported: ${otherA.length} ${JSON.stringify(otherA.slice(0, 5))}`,
          `B: ${producerB.attempts.length} runs, each executed and completed once; ${bDuringOutage.length} completed between the kill and the promotion ` +
            `(${promotedSeenAt - killSentAt} ms); B's master said cluster_state:fail ${failWindow ? `from kill+${failWindow.from - killSentAt} to kill+${failWindow.to - killSentAt} ms (${bDuringFail} B completions inside; B's next completion ${bResumedAfter} ms after its last fail sample)` : 'never'}; ` +
            `longest gap between B completions: ${longestGapB} ms from the kill to 1 s after the failover vs ${longestGapBBefore} ms before the kill`,
        ].join('\n'),
      );
    });
  },
);

function sign(ms: number): string {
  return ms >= 0 ? `+${ms}` : `${ms}`;
}
