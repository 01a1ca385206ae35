import Redis from 'ioredis';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, redisUrl, TestApp, uniqueNamespace } from '../support/app';
import { ChaosBatch } from './batches.workflows';
import { ChildWorker } from './child-worker';

jest.setTimeout(90_000);

/** Every effect line of every process: `<member id> <charge|done> <pid>`. */
function effects(dir: string): Array<{ member: string; what: string; pid: number }> {
  return readdirSync(dir)
    .flatMap((file) => readFileSync(join(dir, file), 'utf8').split('\n'))
    .filter(Boolean)
    .map((line) => {
      const [member, what, pid] = line.split(' ');
      return { member, what, pid: Number(pid) };
    });
}

describe('a worker SIGKILLed during a batch', () => {
  const ns = uniqueNamespace('batch-kill');
  const fxDir = mkdtempSync(join(tmpdir(), 'sluice-batch-'));
  let redis: Redis;
  let producer: TestApp;
  let rescuer: TestApp | undefined;
  let child: ChildWorker | undefined;

  beforeAll(async () => {
    redis = rawRedis();
    producer = await createApp([], { namespace: ns, worker: { enabled: false } });
    process.env.FX_DIR = fxDir;
  });

  afterAll(async () => {
    if (child && !(await Promise.race([child.exited.then(() => true), Promise.resolve(false)]))) child.proc.kill('SIGKILL');
    await rescuer?.close();
    await producer?.close();
    await dropNamespace(redis, ns);
    await redis.quit();
    rmSync(fxDir, { recursive: true, force: true });
  });

  it('loses no member and runs none twice: the batches are recovered whole, their step replayed', async () => {
    const count = 20;
    const ids = Array.from({ length: count }, (_, i) => `member-${i}`);
    child = new ChildWorker(
      { REDIS_URL: redisUrl(), NS: ns, FX_DIR: fxDir, BATCH_HOLD: '1', CONCURRENCY: '10', LOCK_MS: '500', STALLED_INTERVAL_MS: '250' },
      join(__dirname, 'batches.process.ts'),
    );
    await child.waitFor((m) => m.ready === true, 'ready');
    const handles = await Promise.all(ids.map((id, i) => producer.client.enqueue(ChaosBatch, i, { id })));

    // The child holds every batch, each past its memoized step: kill it there.
    const held = new Set<string>();
    await child.waitFor((m) => {
      if (m.held) for (const id of m.members as string[]) held.add(id);
      return held.size === count;
    }, 'every member held');
    const childPid = child.pid;
    child.proc.kill('SIGKILL');
    expect(await child.exited).toEqual({ code: null, signal: 'SIGKILL' });

    // Nothing finished: every member still waits in its batch, every batch is leased to the dead worker.
    const batchIds = new Set<string>();
    for (const id of ids) {
      const info = (await producer.client.get(id))!;
      expect(info.state).toBe('batched');
      batchIds.add(info.batch!);
    }
    for (const batchId of batchIds) expect(await producer.client.get(batchId)).toMatchObject({ state: 'active', attempts: 1 });

    rescuer = await createApp([ChaosBatch], { namespace: ns, worker: { concurrency: 10, lockMs: 500, stalledIntervalMs: 250 } });
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));

    // Each member's own result; the charge step is the memo the killed process wrote.
    expect(results).toEqual(ids.map((_, i) => ({ n: i * 10, charged: childPid })));
    const lines = effects(fxDir);
    const charges = lines.filter((l) => l.what === 'charge');
    const done = lines.filter((l) => l.what === 'done');
    expect(charges.map((l) => l.member).sort()).toEqual([...ids].sort()); // charged once each
    expect(charges.every((l) => l.pid === childPid)).toBe(true);
    expect(done.map((l) => l.member).sort()).toEqual([...ids].sort()); // completed once each
    expect(done.every((l) => l.pid === process.pid)).toBe(true);

    // No member in two batches; each batch recovered once and completed whole.
    const seen = new Set<string>();
    for (const batchId of batchIds) {
      const members = (await producer.client.batchMembers(batchId))!;
      expect(members.length).toBeLessThanOrEqual(5);
      for (const id of members) {
        expect(seen.has(id)).toBe(false);
        seen.add(id);
      }
      expect(await producer.client.get(batchId)).toMatchObject({ state: 'completed', attempts: 2, result: members.length });
      expect(await redis.hget(`{sluice:${ns}}:run:${batchId}`, 'stalls')).toBe('1');
    }
    expect(seen.size).toBe(count);
    for (const id of ids) expect(await producer.client.get(id)).toMatchObject({ state: 'completed', attempts: 0 });
    expect(await redis.zcard(`{sluice:${ns}}:leases`)).toBe(0);
    expectConsistent(await auditNamespace(redis, { namespace: ns, acknowledged: [...ids, ...batchIds] }));
  });
});
