import { randomBytes } from 'node:crypto';
import type Redis from 'ioredis';
import { QueueConfigError, RedisCommandError, RunContext, Workflow } from '../../lib';
import { aclPattern, aclSetUser, type AclRole } from '../../lib/redis/acl.rules';
import { createApp, dropNamespace, rawRedis, uniqueNamespace, type TestApp } from '../support/app';
import { createDashboardApp, type DashboardApp } from '../support/dashboard-app';
import { rejection } from '../support/rejection';
import { aclDenials, testTls, userConnection } from '../support/secure';

/**
 * Each role's documented ACL rule (lib/redis/acl.rules.ts, docs/connections.md), for one
 * namespace, over TLS: enough for what the role does, and a rule with one permission taken away
 * fails the boot with an error that names it.
 */
@Workflow('acl.double', { attempts: 2 })
class Double {
  async run(input: { n: number }, ctx: RunContext) {
    return ctx.step('double', () => input.n * 2);
  }
}

const server = testTls()!;

describe('ACL users, one per role', () => {
  let admin: Redis;
  const users: string[] = [];
  const apps: Array<TestApp | DashboardApp> = [];
  const namespaces: string[] = [];

  beforeAll(() => {
    admin = rawRedis();
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    for (const user of users.splice(0)) await admin.call('ACL', 'DELUSER', user);
    for (const namespace of namespaces.splice(0)) await dropNamespace(admin, namespace);
  });
  afterAll(() => admin.quit());

  /** A new ACL user with `role`'s documented rule for `namespace`, less `without` (each must be in the rule). */
  async function user(role: AclRole, namespace: string, without: string[] = []) {
    const name = `acl-${role}-${randomBytes(3).toString('hex')}`;
    const full = aclSetUser(role, name, server.password, { namespace });
    const rule = full.filter((part) => !without.includes(part));
    expect(full.length - rule.length).toBe(without.length);
    await admin.call('ACL', ...rule.slice(1));
    users.push(name);
    return userConnection(server, name);
  }

  function namespace(): string {
    const created = uniqueNamespace('acl');
    namespaces.push(created);
    return created;
  }

  it('a worker, a producer and a read-only dashboard each do their work with exactly their rule', async () => {
    const ns = namespace();
    const worker = await createApp([Double], { namespace: ns, connection: await user('worker', ns) });
    apps.push(worker);
    // Declares the workflow (to enqueue it by class) but runs no worker: the producer's rule.
    const producer = await createApp([Double], { namespace: ns, worker: { enabled: false }, connection: await user('producer', ns) });
    apps.push(producer);
    const { client } = producer;

    expect(await client.run(Double, { n: 21 }, { timeoutMs: 10_000 })).toBe(42);
    const waited = await client.enqueue(Double, { n: 4 });
    expect(await waited.result({ timeoutMs: 10_000 })).toBe(8);
    const delayed = await client.enqueue(Double, { n: 5 }, { delayMs: 3_600_000 });
    expect(await client.cancel(delayed.id)).toMatchObject({ cancelled: true });
    expect(await client.pause({ workflow: Double })).toBe(true);
    expect(await client.resume({ workflow: Double })).toBe(true);
    await client.setLimits({ workflow: 'acl.double', limit: 5 });
    expect(await client.getLimits({ workflow: 'acl.double' })).toMatchObject({ workflow: 5 });
    expect((await client.stats({ workflow: Double })).workflows['acl.double']).toMatchObject({ completed: 2, cancelled: 1 });
    expect((await client.listRuns({ workflow: Double, state: 'cancelled' })).runs.map((run) => run.id)).toEqual([delayed.id]);

    // The dashboard's process runs no worker and leaves migrating to the others.
    const dashboard = await createDashboardApp(
      'express',
      [],
      { namespace: ns, worker: { enabled: false }, migrate: false, connection: await user('dashboard', ns) },
      { path: '/sluice' },
    );
    apps.push(dashboard);
    const api = (path: string) => fetch(`${dashboard.origin}/sluice/api${path}`);
    const overview = await api('/overview');
    expect(overview.status).toBe(200);
    expect(await overview.text()).toContain('acl.double');
    const run = await api(`/runs/${waited.id}`);
    expect(run.status).toBe(200);
    expect(await run.text()).toContain(waited.id);
    for (const path of ['/runs?workflow=acl.double&state=cancelled', '/schedules', '/workflows/acl.double/groups']) {
      const reply = await api(path);
      expect([path, reply.status, reply.status === 200 ? '' : await reply.text()]).toEqual([path, 200, '']);
    }
    // Nothing was refused, in the background either (a worker's blocking read, a heartbeat…).
    await Promise.all(apps.splice(0).map((app) => app.close()));
    expect(await aclDenials(admin, users)).toEqual([]);
  });

  it.each<[AclRole, string, string]>([
    // Only sent once the worker runs out of work: without the boot check, a failure after the boot.
    ['worker', '+blpop', 'lacks permissions a Sluice worker needs: +blpop'],
    // Only inside the enqueue script, after its first writes.
    ['producer', '+rpushx', 'lacks permissions a Sluice producer needs: +rpushx'],
    // Only inside list-runs (a page newest first).
    ['dashboard', '+zrevrange', 'lacks permissions a Sluice dashboard needs: +zrevrange'],
    ['worker', '+subscribe', 'lacks permissions a Sluice worker needs: +subscribe'],
  ])('a %s user without %s: the boot fails naming it', async (role, permission, message) => {
    const ns = namespace();
    const connection = await user(role, ns, [permission]);
    const booted =
      role === 'dashboard'
        ? createDashboardApp('express', [], { namespace: ns, worker: { enabled: false }, migrate: false, connection }, { path: '/sluice' })
        : createApp([Double], { namespace: ns, connection, ...(role === 'producer' && { worker: { enabled: false } }) });
    const error = await rejection(() => booted);
    expect(error).toBeInstanceOf(QueueConfigError);
    expect((error as Error).message).toContain(message);
    expect((error as Error).message).toContain('docs/connections.md#acl-users');
  });

  it("a user without the namespace's keys, its channels or the scripts: the boot fails saying which", async () => {
    const ns = namespace();
    const pattern = aclPattern({ namespace: ns });
    const cases: Array<[string[], RegExp]> = [
      [[`~${pattern}`], new RegExp(`may not access the namespace's keys: grant ~\\{sluice:${ns}\\}:\\*`)],
      [[`&${pattern}`], new RegExp(`lacks permissions a Sluice worker needs: &\\{sluice:${ns}\\}:\\*`)],
      // No FCALL: Sluice falls back to EVALSHA, which the rule does not grant either.
      [['+fcall'], /may not run Sluice's scripts: grant \+fcall and \+function\|load \(NOPERM .*'eval(sha)?'/],
    ];
    for (const [without, message] of cases) {
      const error = await rejection(async () => createApp([Double], { namespace: ns, connection: await user('worker', ns, without) }));
      expect(error).toBeInstanceOf(QueueConfigError);
      expect((error as Error).message).toMatch(message);
    }
  });

  it('a permission taken away at runtime: the call fails with a RedisCommandError that names it and points to the rules', async () => {
    const ns = namespace();
    const connection = await user('producer', ns);
    const producer = await createApp([Double], { namespace: ns, worker: { enabled: false }, connection });
    apps.push(producer);
    const handle = await producer.client.enqueue(Double, { n: 1 });
    await admin.call('ACL', 'SETUSER', users[users.length - 1], '-hmget');
    const error = await rejection(() => producer.client.get(handle.id));
    expect(error).toBeInstanceOf(RedisCommandError);
    expect((error as Error).message).toMatch(/NOPERM .*'hmget'.*see docs\/connections\.md#acl-users/);
  });
});
