import type Redis from 'ioredis';
import { InvalidInputError, InvalidNameError, InvalidOptionError, UnknownWorkflowError, Workflow } from '../../lib';
import { auditNamespace, expectConsistent } from '../support/audit';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Gates } from '../support/workflows';

/**
 * Pause and resume, fleet-wide and in Lua: a paused workflow (or group) starts nothing — not from
 * the queue, not through the enqueue fast path — while enqueues are accepted and runs in flight
 * finish; resume starts what waited. (Two worker processes: test/chaos/run-control.spec.ts.)
 */
const started: string[] = [];
const gates = new Gates();
const begun = new Gates();

@Workflow('pz.main')
class Main {
  async run(input: { key: string; hold?: boolean }) {
    started.push(input.key);
    begun.open(input.key);
    if (input.hold) await gates.get(input.key).promise;
    return input.key;
  }
}

@Workflow('pz.other')
class Other {
  run(input: { key: string }) {
    started.push(input.key);
    return input.key;
  }
}

describe('pause and resume', () => {
  const ns = uniqueNamespace('pz');
  const base = `{sluice:${ns}}:`;
  let redis: Redis;
  let app: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    app = await createApp([Main, Other], { namespace: ns, worker: { concurrency: 8 } });
  });
  afterAll(async () => {
    gates.openAll();
    await app.close();
    await dropNamespace(redis, ns);
    await redis.quit();
  });

  it('a paused workflow starts nothing (queue or fast path), its run in flight finishes, others carry on; resume starts the backlog', async () => {
    const client = app.client;
    const inFlight = await client.enqueue(Main, { key: 'flight', hold: true });
    await begun.get('flight').promise;
    expect(await client.pause({ workflow: Main })).toBe(true);
    expect(await client.pause({ workflow: 'pz.main' })).toBe(false); // already paused

    // The worker is idle (parked): without the pause these would be fast-pathed at once.
    const held = await Promise.all(['p1', 'p2', 'p3'].map((key) => client.enqueue(Main, { key })));
    const other = await client.enqueue(Other, { key: 'o1' });
    await expect(other.result({ timeoutMs: 10_000 })).resolves.toBe('o1');
    gates.open('flight');
    await expect(inFlight.result({ timeoutMs: 10_000 })).resolves.toBe('flight');

    // Nothing of the paused workflow started, through the claims the completions above made.
    expect(started.filter((key) => key.startsWith('p'))).toEqual([]);
    for (const handle of held) expect((await client.get(handle.id))?.state).toBe('waiting');
    const stats = (await client.stats({ workflow: Main })).workflows['pz.main'];
    expect(stats).toEqual(expect.objectContaining({ paused: true, waiting: 3, active: 0 }));
    expectConsistent(await auditNamespace(redis, { namespace: ns }));

    expect(await client.resume({ workflow: Main })).toBe(true);
    expect(await client.resume({ workflow: Main })).toBe(false);
    await expect(Promise.all(held.map((h) => h.result({ timeoutMs: 10_000 })))).resolves.toEqual(['p1', 'p2', 'p3']);
    expect((await client.stats({ workflow: Main })).workflows['pz.main'].paused).toBe(false);
    // With nothing paused or rate-limited left, the namespace's controls counter is gone: claims pay nothing.
    expect(await redis.hget(`${base}limits`, 'controls')).toBeNull();
  });

  it('a paused group waits while the other groups run; resume brings it back to the round-robin', async () => {
    const client = app.client;
    expect(await client.pause({ workflow: Main, group: 'tenant-a' })).toBe(true);
    const a = await Promise.all(['ga1', 'ga2'].map((key) => client.enqueue(Main, { key }, { group: 'tenant-a' })));
    const b = await Promise.all(['gb1', 'gb2'].map((key) => client.enqueue(Main, { key }, { group: 'tenant-b' })));
    await expect(Promise.all(b.map((h) => h.result({ timeoutMs: 10_000 })))).resolves.toEqual(['gb1', 'gb2']);
    expect(started).not.toContain('ga1');
    expect(await redis.zscore(`${base}wf:pz.main:ready`, 'tenant-a')).toBeNull();
    const stats = (await client.stats({ workflow: Main, groups: true })).workflows['pz.main'];
    expect(stats.paused).toBe(false);
    expect(stats.groups?.['tenant-a']).toEqual({ waiting: 2, active: 0, limit: null, paused: true, rateLimit: null });
    expectConsistent(await auditNamespace(redis, { namespace: ns }));

    expect(await client.resume({ workflow: Main, group: 'tenant-a' })).toBe(true);
    await expect(Promise.all(a.map((h) => h.result({ timeoutMs: 10_000 })))).resolves.toEqual(['ga1', 'ga2']);
  });

  it('bad input: typed errors, nothing written', async () => {
    const client = app.client;
    const before = await redis.hgetall(`${base}limits`);
    await expect(client.pause(null as never)).rejects.toBeInstanceOf(InvalidInputError);
    await expect(client.pause({} as never)).rejects.toBeInstanceOf(InvalidInputError);
    await expect(client.pause({ workflow: 'pz.nope' })).rejects.toBeInstanceOf(UnknownWorkflowError);
    await expect(client.pause({ workflow: Main, group: '*' })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(client.pause({ workflow: Main, group: 'a b' })).rejects.toBeInstanceOf(InvalidNameError);
    // The target is checked whole before the fleet lookup: a bad group of an unknown workflow is a bad group.
    await expect(client.pause({ workflow: 'pz.nope', group: 'a b' })).rejects.toBeInstanceOf(InvalidNameError);
    await expect(client.resume({ workflow: Main, group: '' })).rejects.toBeInstanceOf(InvalidNameError);
    expect(await redis.hgetall(`${base}limits`)).toEqual(before);
  });
});
