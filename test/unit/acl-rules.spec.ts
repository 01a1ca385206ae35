import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ACL_OPTIONAL, ACL_ROLES, aclCommands, aclSetUser, type AclRole } from '../../lib/redis/acl.rules';
import { allScripts, type ScriptName } from '../../lib/redis/lua.source';

/**
 * The ACL rules (lib/redis/acl.rules.ts) against what they stand for: the commands the Lua
 * scripts of each role call (read from lua/, includes inlined: a new `redis.call` fails this
 * until the rule has it), the commands each role sends outside scripts, and docs/connections.md,
 * which must print each rule exactly. The secure suite (npm run test:secure) runs the apps as
 * users with these rules; this keeps them from growing or going stale where no test reaches.
 */

/** The scripts each role calls (a role also calls those of the roles before it). */
const SCRIPTS: Record<AclRole, ScriptName[]> = {
  // The dashboard's reads: stats (overview, groups), listRuns, listSchedules; and its boot check.
  dashboard: ['stats', 'list-runs', 'schedule-list', 'acl-check'],
  // QueueClient whole, and the layout migration every process makes at bootstrap by default.
  producer: [
    'enqueue',
    'enqueue-many',
    'enqueue-dedupe',
    'watch',
    'cancel',
    'retry',
    'remove',
    'set-control',
    'set-limits',
    'activate-groups',
    'signal',
    'send-event',
    'publish',
    'schedule-write',
    'schedule-control',
    'migrate-lock',
    'migrate-group-due',
    'migrate-lean-records',
    'migrate-schedule-index',
  ],
  // Every script: a worker's app holds a QueueClient too.
  worker: allScripts().map((script) => script.name),
};

/** What each role sends outside the scripts (each with the role before it's). */
const DIRECT: Record<AclRole, string[]> = {
  // the layout's GET, get()/timeline()'s HMGET, the completed-runs watch's TIME and HSET, the
  // fleet lookup's SISMEMBER (a workflow named without its class, as the dashboard does), and
  // listEvents' ZREVRANGE (the runs page's event filter; getEvent's is an HMGET)
  dashboard: ['get', 'hmget', 'time', 'hset', 'sismember', 'zrevrange'],
  // the migration's EXISTS and SCAN (and SSCAN of workflows), a schedule's HGETALL
  producer: ['exists', 'scan', 'sscan', 'hgetall'],
  // the wake's BLPOP, passing a wake on (RPUSH), withdrawing a park announcement (ZREM)
  worker: ['blpop', 'rpush', 'zrem'],
};

const NOT_DATA = new Set(['client|setname', 'info', 'ping', 'fcall', 'function|load', 'publish', 'subscribe', 'unsubscribe']);

/** The commands a script's source (its includes inlined) may call. */
function scriptCommands(source: string): string[] {
  const code = source.replace(/--\[\[[\s\S]*?\]\]/g, '').replace(/--.*$/gm, '');
  const found: string[] = [];
  for (const call of code.matchAll(/redis\.p?call\(([^,)]*)/g)) {
    const names = [...call[1].matchAll(/'([A-Za-z]+)'/g)].map((m) => m[1]);
    // `redis.call(command, …)` is callChunked's, whose callers name the command (below).
    if (names.length === 0) expect(call[1].trim()).toBe('command');
    found.push(...names);
  }
  for (const chunked of code.matchAll(/callChunked\('([A-Za-z]+)'/g)) found.push(chunked[1]);
  return found.map((name) => name.toLowerCase());
}

function rolesUpTo(role: AclRole): AclRole[] {
  return ACL_ROLES.slice(0, ACL_ROLES.indexOf(role) + 1);
}

describe('ACL rules', () => {
  const byName = new Map(allScripts().map((script) => [script.name, script]));

  it.each(ACL_ROLES)('%s: exactly the commands of its scripts and of its calls outside them', (role) => {
    const scripts = new Set(rolesUpTo(role).flatMap((r) => SCRIPTS[r]));
    const needed = new Set([...rolesUpTo(role).flatMap((r) => DIRECT[r])]);
    for (const name of scripts) scriptCommands(byName.get(name)!.source).forEach((command) => needed.add(command));
    // The scripts publish with PUBLISH on one server and SPUBLISH on a cluster (the rule has the one that applies).
    needed.delete('spublish');
    needed.delete('publish');
    const data = aclCommands(role).filter((command) => !NOT_DATA.has(command));
    expect(data).toEqual([...needed].sort());
  });

  it('each role has what the roles before it have, the connection and function permissions, and the pub/sub of its kind of server', () => {
    for (const [i, role] of ACL_ROLES.entries()) {
      const server = aclCommands(role);
      if (i > 0) expect(server).toEqual(expect.arrayContaining(aclCommands(ACL_ROLES[i - 1])));
      expect(server).toEqual(expect.arrayContaining([...ACL_OPTIONAL, 'ping', 'publish']));
      expect(server).not.toContain('spublish');
      const cluster = aclCommands(role, true);
      expect(cluster).toEqual(expect.arrayContaining(['spublish', 'cluster|slots']));
      expect(cluster.filter((c) => ['publish', 'subscribe', 'unsubscribe'].includes(c))).toEqual([]);
      expect(cluster.includes('ssubscribe')).toBe(role !== 'dashboard');
      expect(server.includes('subscribe')).toBe(role !== 'dashboard');
    }
  });

  it('docs/connections.md prints each rule exactly, for one server and for a cluster', () => {
    const docs = readFileSync(join(__dirname, '..', '..', 'docs', 'connections.md'), 'utf8');
    for (const role of ACL_ROLES) {
      for (const cluster of [false, true]) {
        const line = aclSetUser(role, `sluice-${role}`, 'CHANGE-ME', { namespace: 'shop', cluster }).join(' ');
        expect(docs.split('\n')).toContain(line);
      }
    }
  });
});
