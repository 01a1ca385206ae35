import { Inject, Injectable, Logger } from '@nestjs/common';
import { QueueConfigError, RedisCommandError } from '../errors';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { quotedReply } from './command.refusal';
import { RedisConnections } from './redis.connections';
import { throughSentinel } from '../interfaces/sentinel.options';
import type { AclCheck } from './acl.check';

/**
 * The oldest Redis the scripts and calls work on. 7.0: the scripts start with `#!lua` and their
 * flags (see loadScript in lua.scripts.ts), and a cluster's channels are sharded (`SSUBSCRIBE`).
 * Older needs: 6.0 for the worker's fractional `BLPOP` timeout and ACL users, 5.0 for `ZPOPMIN`
 * and writes after `TIME`.
 */
export const MIN_REDIS_VERSION = '7.0.0';

/** What the boot checks read from the server; a field is undefined when it could not be read. */
export interface RedisServerFacts {
  /** `redis_version` from INFO. */
  version?: string;
  /** `maxmemory_policy` from INFO. */
  policy?: string;
  /** `maxmemory` from INFO, bytes (0: no limit). */
  maxmemory?: number;
  /** `aof_enabled` from INFO. */
  aof?: boolean;
  /** Whether `CONFIG GET save` names any save point (RDB snapshots). */
  rdb?: boolean;
  /** Why INFO could not be read (an ACL without `+info`, a proxy without the command). */
  infoRefused?: string;
  /** Why CONFIG GET could not be read (an ACL without `+config`, managed Redis disables it). */
  configRefused?: string;
  /** `cluster_enabled` from INFO: the server is a Redis Cluster node. */
  clusterNode?: boolean;
  /** Whether the options name a cluster (`connection: { cluster }` or an ioredis Cluster). */
  clusterOptions?: boolean;
  /** `role:slave` in INFO: the primary it replicates (`master_host:master_port`). */
  replicaOf?: string;
}

/** What the facts mean: a reason to refuse to boot, warnings, and notes (logged once). */
export interface RedisServerAssessment {
  fatal?: string;
  warnings: string[];
  notes: string[];
}

/**
 * Judges the facts (pure, so every branch is unit-tested without a server of each kind).
 *
 * Eviction: `noeviction` is safe. `allkeys-*` may evict any key under memory pressure — a queued
 * run's record, a lane, a lease — losing runs silently and leaving the indexes inconsistent: a
 * warning, or with `strict` a refusal. `volatile-*` only evicts keys with a TTL: finished runs'
 * records (their results may go before `resultTtlMs`) and short-lived coordination keys whose
 * loss costs at most a redundant scan or one stall; queued and active runs have no TTL and are
 * never evicted. So it is noted, not warned about.
 */
export function assessRedisServer(facts: RedisServerFacts, strict: boolean): RedisServerAssessment {
  const warnings: string[] = [];
  const notes: string[] = [];
  if (facts.infoRefused !== undefined) {
    warnings.push(
      `Redis refused INFO (${facts.infoRefused}): its version, maxmemory-policy and persistence were not checked (grant +info to check them)`,
    );
    // Each refused command gets its line (a user who grants +info alone would meet this one next).
    if (facts.configRefused !== undefined)
      notes.push(
        `Redis refused CONFIG GET save (${facts.configRefused}): its save points were not checked either; nothing else needs CONFIG`,
      );
    return { warnings, notes };
  }
  if (facts.version === undefined) {
    warnings.push(`Redis INFO reports no redis_version: cannot check that the server is Redis ${MIN_REDIS_VERSION} or later`);
  } else if (compareVersions(facts.version, MIN_REDIS_VERSION) < 0) {
    return {
      fatal: `Redis ${facts.version} is not supported: Sluice needs Redis ${MIN_REDIS_VERSION} or later (its scripts and blocking reads use commands and script flags older servers lack)`,
      warnings,
      notes,
    };
  }
  if (facts.replicaOf !== undefined) {
    // Writes would be refused (READONLY), and reads would see a lagging copy.
    return {
      fatal: `Redis is a replica (of ${facts.replicaOf}): Sluice needs the primary; connect to it, or through Redis Sentinel (connection: { sentinels, name }, docs/connections.md)`,
      warnings,
      notes,
    };
  }
  if (facts.clusterNode && facts.clusterOptions === false) {
    // A single-server connection would fail on the first key another node serves, and the
    // scripts would publish on sharded channels nobody listens to.
    return {
      fatal:
        'Redis is a Redis Cluster node but options.connection names a single server: give connection: { cluster: [{ host, port }, …] } (docs/connections.md)',
      warnings,
      notes,
    };
  }
  const policy = facts.policy;
  if (policy?.startsWith('allkeys-')) {
    const limit = facts.maxmemory ? '' : ' (maxmemory is 0 now, so nothing is evicted until a limit is set)';
    const risk =
      `Redis maxmemory-policy is ${policy}${limit}: under memory pressure Redis may evict any key, including queued and active runs, ` +
      'which are then lost without an error and leave the queues inconsistent. Use noeviction (writes then fail with an OOM error instead) or a volatile-* policy';
    if (strict) return { fatal: `${risk}; refused because strict is true`, warnings, notes };
    warnings.push(risk);
  } else if (policy?.startsWith('volatile-')) {
    notes.push(
      `Redis maxmemory-policy is ${policy}: under memory pressure finished runs' results may be evicted before resultTtlMs; queued and active runs have no TTL and are never evicted`,
    );
  }
  if (facts.aof === false && facts.rdb === false) {
    notes.push(
      'Redis has no persistence (appendonly no, no save points): a Redis restart loses every queued and active run. Enable AOF (appendfsync everysec or always) where runs must survive one',
    );
  } else if (facts.aof === false && facts.configRefused !== undefined) {
    notes.push(`Redis refused CONFIG GET save (${facts.configRefused}): whether it persists anything (AOF is off) was not checked`);
  }
  return { warnings, notes };
}

/**
 * One field of an `INFO` text, or undefined if it has none. Looked up rather than the text split
 * into a map: a boot reads five of its two hundred-odd fields, and splitting it all took about
 * 0.1 ms of every worker's boot.
 */
export function infoField(text: string, name: string): string | undefined {
  // Where the line starts in `text` (a match in '\n' + text starts one before its line).
  const at = `\n${text}`.indexOf(`\n${name}:`);
  if (at < 0) return undefined;
  const start = at + name.length + 1;
  const end = text.indexOf('\n', start);
  return text.slice(start, end < 0 ? undefined : end).trim();
}

/** Compares dotted versions numerically ('6.2.14' < '7.0.0'); a missing or odd part counts as 0. */
export function compareVersions(a: string, b: string): number {
  const parts = (v: string) => v.split('.').map((part) => Number.parseInt(part, 10) || 0);
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const diff = (x[i] ?? 0) - (y[i] ?? 0);
    if (diff !== 0) return Math.sign(diff);
  }
  return 0;
}

/**
 * Boot checks of the Redis server: version, eviction policy, persistence (`INFO`, and
 * `CONFIG GET save` for when AOF is off), and a named ACL user's permissions (AclCheck), once per process, before the first migration or worker
 * start (see `MigrationRunner`). Each read is one call under the usual bound (`redisTimeoutMs`),
 * fail-fast at bootstrap: when Redis is down, the check rejects with the connection error and the
 * bootstrap goes on as it does without Redis; the check then runs before the deferred migration
 * and worker start. A refused read (ACL, managed Redis) is a warning, never a failure.
 */
@Injectable()
export class RedisServerCheck {
  private readonly logger = new Logger('Sluice');
  private passed = false;
  private refusal?: QueueConfigError;

  constructor(
    private readonly connections: RedisConnections,
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    /** The ACL user's permissions, checked with the server (a named ACL user only: see AclCheck). */
    private readonly acl?: AclCheck,
  ) {}

  /**
   * Resolves once the server was checked (now or earlier). Rejects with `QueueConfigError` for an
   * unsupported server (every later call too: the verdict is kept), and with a
   * `RedisConnectionError` when Redis did not answer (checked again next time).
   *
   * @param failFast give up at the connection's first error (bootstrap)
   * @param atBootstrap whether a refusal fails the bootstrap (thrown) or comes later (logged as an error too)
   */
  async ensure(failFast = false, atBootstrap = false): Promise<void> {
    if (this.passed) return;
    if (this.refusal) throw this.refusal;
    // Sent with the server's reads, in the same round trip; looked at once the server passed.
    const aclCheck = this.acl?.check(failFast);
    aclCheck?.catch(() => undefined);
    const facts = await this.read(failFast);
    const assessment = assessRedisServer(facts, this.options.strict);
    const { warnings, notes } = assessment;
    const fatal = assessment.fatal ?? (await aclCheck);
    if (fatal) {
      this.refusal = new QueueConfigError(fatal);
      // After bootstrap nobody sees the throw but the background retry: say it plainly, once.
      if (!atBootstrap) this.logger.error(`${fatal}; the worker will not start`);
      throw this.refusal;
    }
    warnings.forEach((warning) => this.logger.warn(warning));
    notes.forEach((note) => this.logger.log(note));
    this.passed = true;
  }

  private async read(failFast: boolean): Promise<RedisServerFacts> {
    const link = this.connections.command;
    const bound = { idempotent: true, failFast };
    // INFO and CONFIG GET save are the replies to what the connection's ready check sent a moment
    // ago, when there are some (see LinkConnection): no round trip of the check's own. Else CONFIG
    // GET save goes out at once rather than after INFO says AOF is off (as in Redis's default
    // configuration), when alone it matters: one round trip, not two.
    const infoRead = link.call('server check (INFO)', (redis) => link.takeReadyRead(redis, 'info') ?? redis.info(), bound);
    const saveRead = link.call(
      'server check (CONFIG GET save)',
      (redis) => link.takeReadyRead(redis, 'save') ?? (redis.config('GET', 'save') as Promise<string[]>),
      bound,
    );
    saveRead.catch(() => undefined); // read below only when AOF is off
    let info: string;
    try {
      info = await infoRead;
    } catch (error) {
      if (error instanceof RedisCommandError) return { infoRefused: causeOf(error), configRefused: await refusalOf(saveRead) };
      throw error;
    }
    const [maxmemory, aof, cluster] = ['maxmemory', 'aof_enabled', 'cluster_enabled'].map((name) => infoField(info, name));
    const facts: RedisServerFacts = {
      version: infoField(info, 'redis_version'),
      policy: infoField(info, 'maxmemory_policy'),
      ...(maxmemory !== undefined && { maxmemory: Number(maxmemory) }),
      ...(aof !== undefined && { aof: aof === '1' }),
      ...(cluster !== undefined && { clusterNode: cluster === '1' }),
      clusterOptions: this.options.cluster !== undefined,
      // Behind Sentinel a connection that reaches a replica reconnects instead (see LinkConnection).
      ...(infoField(info, 'role') === 'slave' &&
        !throughSentinel(this.options.connection) && { replicaOf: `${infoField(info, 'master_host')}:${infoField(info, 'master_port')}` }),
    };
    if (facts.aof === false) {
      try {
        const reply = await saveRead;
        facts.rdb = (reply[1] ?? '').trim() !== '';
      } catch (error) {
        if (!(error instanceof RedisCommandError)) throw error;
        facts.configRefused = causeOf(error);
      }
    }
    return facts;
  }
}

/** Why Redis refused `read`, or undefined if it answered (or did not answer at all: that is no refusal). */
async function refusalOf(read: Promise<unknown>): Promise<string | undefined> {
  try {
    await read;
    return undefined;
  } catch (error) {
    return error instanceof RedisCommandError ? causeOf(error) : undefined;
  }
}

function causeOf(error: RedisCommandError): string {
  return quotedReply((error.cause as Error | undefined)?.message ?? error.message);
}
