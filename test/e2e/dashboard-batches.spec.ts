import type Redis from 'ioredis';
import { BatchContext, Workflow } from '../../lib';
import { dropNamespace, rawRedis, uniqueNamespace } from '../support/app';
import { createDashboardApp, type DashboardApp } from '../support/dashboard-app';

/** Batches in the dashboard's API (docs/batches.md): a member names its batch, a batch lists its members, the runs list filters by batch. */
@Workflow('dhb.sum', { batch: { maxSize: 3, maxWaitMs: 100 } })
class SumBatch {
  async run(inputs: number[], _ctx: BatchContext<number>) {
    return inputs.map((n) => n + 1);
  }
}

interface RunsReply {
  runs: Array<{ id: string; state: string; workflow: string; batch?: string }>;
  cursor: string | null;
}
interface RunReply {
  run: { id: string; state: string; batch?: string; batchOf?: string; result?: unknown };
  members?: string[];
}

describe('dashboard: batches', () => {
  const ns = uniqueNamespace('dhb');
  let redis: Redis;
  let dash: DashboardApp;

  beforeAll(async () => {
    redis = rawRedis();
    dash = await createDashboardApp('express', [SumBatch], { namespace: ns }, { path: '/sluice' });
  });
  afterAll(async () => {
    await dash?.close();
    await dropNamespace(redis, ns);
    redis.disconnect();
  });

  const get = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${dash.origin}/sluice/${path}`);
    expect(response.status).toBe(200);
    return (await response.json()) as T;
  };

  it('shows a member with its batch, a batch with its members, and filters runs by batch', async () => {
    const ids = ['m1', 'm2', 'm3', 'm4'];
    const results = await Promise.all(ids.map((id, i) => dash.client.run(SumBatch, i, { id, timeoutMs: 10_000 })));
    expect(results).toEqual([1, 2, 3, 4]);
    const member = await get<RunReply>('api/runs/m1');
    expect(member.run).toMatchObject({ id: 'm1', state: 'completed', result: 1 });
    const batchId = member.run.batch!;
    expect(batchId).toEqual(expect.any(String));

    const batch = await get<RunReply>(`api/runs/${encodeURIComponent(batchId)}`);
    expect(batch.run).toMatchObject({ id: batchId, batchOf: 'dhb.sum', state: 'completed' });
    expect(batch.members).toContain('m1');
    expect(batch.members!.length).toBeLessThanOrEqual(3);

    const listed = await get<RunsReply>(`api/runs?batch=${encodeURIComponent(batchId)}`);
    expect(listed.runs.map((r) => r.id)).toEqual(batch.members);
    expect(listed.runs.every((r) => r.batch === batchId && r.state === 'completed' && r.workflow === 'dhb.sum')).toBe(true);
    // Paged: one member a page, each once.
    const first = await get<RunsReply>(`api/runs?batch=${encodeURIComponent(batchId)}&limit=1`);
    expect(first.runs.map((r) => r.id)).toEqual(batch.members!.slice(0, 1));
    if (batch.members!.length > 1) {
      const second = await get<RunsReply>(`api/runs?batch=${encodeURIComponent(batchId)}&limit=1&cursor=${first.cursor}`);
      expect(second.runs.map((r) => r.id)).toEqual(batch.members!.slice(1, 2));
    }
    // No such batch: no rows.
    expect((await get<RunsReply>('api/runs?batch=nope')).runs).toEqual([]);
    // The overview lists the batch workflow (the one workers register and claim); the members' counts are their workflow's.
    const overview = await get<{ workflows: Array<{ name: string; completed: number }> }>('api/overview');
    const counts = Object.fromEntries(overview.workflows.map((w) => [w.name, w.completed]));
    expect(counts['dhb.sum.batch']).toBeGreaterThanOrEqual(2);
    expect((await dash.client.stats({ workflow: SumBatch })).workflows['dhb.sum'].completed).toBe(4);
  });
});
