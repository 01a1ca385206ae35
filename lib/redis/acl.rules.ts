/**
 * The Redis ACL permissions each kind of Sluice process needs, least privilege: docs/connections.md
 * ("ACL users") prints them as `ACL SETUSER` lines, the boot check of a process that connects as
 * a named ACL user asks Redis whether it holds them (AclCheck), and the secure test suite creates
 * its users from them. test/unit/acl-rules.spec.ts keeps the three in step, and derives the
 * commands the Lua scripts call from lua/ to check the lists below against them.
 *
 * Why the scripts' commands are granted by include: a command a script calls is checked against
 * the caller's ACL when the script reaches it, and a refusal then stops the script after its
 * earlier writes. So a role gets every command of every script it calls, includes included, not
 * only those of the branches a test happened to take.
 */

export type AclRole = 'dashboard' | 'producer' | 'worker';

export const ACL_ROLES: readonly AclRole[] = ['dashboard', 'producer', 'worker'];

/**
 * Sent as a connection connects: its name (`CLIENT SETNAME`, errors ignored), the ready check's
 * and boot checks' `INFO` (refused: a warning, checks skipped), and `PING` (QueueHealth, and a
 * waiter's "all delivered so far" on the subscriber).
 */
const CONNECTION = ['client|setname', 'info', 'ping'];

/** The scripts run as one Redis Functions library (refused: they go through EVALSHA, with a warning). */
const FUNCTIONS = ['fcall', 'function|load'];

/**
 * Every command a read-only dashboard sends: inside the scripts it calls (list-runs, stats,
 * schedule-list; their includes' commands too, see the file comment), and outside them: the
 * layout's GET, QueueClient.get's and timeline's HMGET, the completed-runs watch's TIME and HSET,
 * the SISMEMBER that finds a workflow by name in the fleet (the dashboard has no classes), and
 * the event filter's ZREVRANGE and HMGET (QueueClient.listEvents, getEvent).
 */
const DASHBOARD_DATA = [
  'exists',
  'get',
  'hdel',
  'hexists',
  'hget',
  'hgetall',
  'hincrby',
  'hmget',
  'hset',
  'incr',
  'incrby',
  'lindex',
  'llen',
  'lpop',
  'lpush',
  'lrange',
  'ltrim',
  'pexpire',
  'rpush',
  'sadd',
  'scard',
  'sismember',
  'smembers',
  'srem',
  'sscan',
  'time',
  'zadd',
  'zcard',
  'zcount',
  'zpopmin',
  'zrange',
  'zrangebylex',
  'zrem',
  'zremrangebyscore',
  'zrevrange',
  'zscore',
];

/**
 * What a producer sends beyond the dashboard's: its scripts (enqueue, run control, signals,
 * schedules, limits, the layout migration) and, outside them, the migration's SCAN and a
 * schedule read's HGETALL.
 */
const PRODUCER_DATA = [
  'del',
  'hlen',
  'hscan',
  'lrem',
  'persist',
  'rename',
  'rpushx',
  'scan',
  'set',
  'spop',
  'zpopmax',
  'zrangebyscore',
  'zremrangebyrank',
  'zunionstore',
];

/** What a worker sends beyond a producer's: the blocking read for wakes, and continueAsNew's HKEYS (lua/continue.lua). */
const WORKER_DATA = ['blpop', 'hkeys'];

/** Publishing (inside the scripts: done, inbox, progress, cancel, handoff) and subscribing: classic on one server, sharded on a cluster. */
const PUBLISH = { server: ['publish'], cluster: ['spublish'] };
const SUBSCRIBE = { server: ['subscribe', 'unsubscribe'], cluster: ['ssubscribe', 'sunsubscribe'] };
/** On a cluster: finding the master of the namespace's slot. */
const CLUSTER = ['cluster|slots'];

/**
 * Permissions whose refusal Sluice works around (so the boot check does not require them): see
 * {@link CONNECTION} and {@link FUNCTIONS}; the boot check's own script call shows that the
 * scripts run one way or the other.
 */
export const ACL_OPTIONAL: ReadonlySet<string> = new Set([...CONNECTION.filter((p) => p !== 'ping'), ...FUNCTIONS]);

export interface AclRuleOptions {
  /** The `prefix` option; default `'sluice'`. */
  prefix?: string;
  /** The namespace, or `*` for every namespace of the prefix. */
  namespace: string;
  /** For a Redis Cluster: sharded pub/sub and CLUSTER SLOTS instead of classic pub/sub. */
  cluster?: boolean;
}

/** The commands (`name` or `name|subcommand`) a role needs, in the order the docs print them. */
export function aclCommands(role: AclRole, cluster = false): string[] {
  const where = cluster ? 'cluster' : 'server';
  const data = [...DASHBOARD_DATA, ...(role === 'dashboard' ? [] : PRODUCER_DATA), ...(role === 'worker' ? WORKER_DATA : [])].sort();
  return [
    ...CONNECTION,
    ...FUNCTIONS,
    ...data,
    ...PUBLISH[where],
    ...(role === 'dashboard' ? [] : SUBSCRIBE[where]),
    ...(cluster ? CLUSTER : []),
  ];
}

/** The key and channel pattern of a namespace (or of every namespace of the prefix, with `*`): `{<prefix>:<namespace>}:*`. */
export function aclPattern(options: AclRuleOptions): string {
  return `{${options.prefix ?? 'sluice'}:${options.namespace}}:*`;
}

/**
 * The ACL rule of a role, as `ACL SETUSER` takes it after the user's name and password: `reset`
 * (no earlier permission, key or channel left), the namespace's keys and channels, `-@all`, then
 * each command.
 */
export function aclRule(role: AclRole, options: AclRuleOptions): string {
  const pattern = aclPattern(options);
  return ['reset', 'on', `~${pattern}`, `&${pattern}`, '-@all', ...aclCommands(role, options.cluster).map((c) => `+${c}`)].join(' ');
}

/** `reset on` is the rule's start; the password comes after it (`reset` would clear one given before). */
export function aclSetUser(role: AclRole, user: string, password: string, options: AclRuleOptions): string[] {
  const [reset, on, ...rest] = aclRule(role, options).split(' ');
  return ['ACL', 'SETUSER', user, reset, on, `>${password}`, ...rest];
}
