import type { Cluster, Redis, RedisOptions } from 'ioredis';
import { QueueConfigError } from '../errors';
import { DEFAULT_MAX_MEMO_BYTES, DEFAULT_MAX_PAYLOAD_BYTES } from './payload.limits';
import { userRedisInstance } from './user-instance';
import { clusterSettings, type ClusterSettings, type RedisClusterConnectionOptions } from './cluster.options';
import { isSentinelOptions, sentinelFields, type RedisSentinelConnectionOptions } from './sentinel.options';
import { Duration, toMilliseconds } from '../util/duration';
import { checkName } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';
import { resolveLoggingOptions, type LoggingOptions, type ResolvedLoggingOptions } from '../util/logging.options';
import { BACKOFF_OPTIONS, type BackoffOptions } from './backoff.options';
import { resolveTelemetryOptions, type ResolvedTelemetryOptions, type TelemetryOptions } from './telemetry.options';

/**
 * Where Redis is: these fields (at least `url`, `host` or `port`), or an ioredis instance that
 * Sluice duplicates with its own connection settings (it never sends commands over yours, and
 * leaves closing it to you). An instance with a `keyPrefix` is refused: Sluice's scripts build
 * keys that a prefix would not reach.
 */
export interface RedisConnectionOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://…`; other fields override its parts. */
  url?: string;
  /** The server's host name or IP address; ioredis's default is `localhost`. */
  host?: string;
  /** The server's port; ioredis's default is 6379. */
  port?: number;
  /** ACL user to authenticate as; without it, the `default` user. */
  username?: string;
  /** Password of the ACL user (or of `requirepass`). */
  password?: string;
  /** Database number; default 0. */
  db?: number;
  /** `true` for TLS with default settings, or Node TLS options. */
  tls?: boolean | RedisOptions['tls'];
}

/** `QueueModuleOptions.worker`: whether this process runs workflows, and how. */
export interface WorkerOptions {
  /** `false` makes this process a producer only: it enqueues and waits but runs nothing. Default `true`. */
  enabled?: boolean;
  /** Runs executed at once by this process, across all its workflows. Default 10. */
  concurrency?: number;
  /** Lease length (ms or e.g. `'30s'`): a run whose worker sends no heartbeat for this long is recovered by another. Default 30 s. */
  lockMs?: Duration;
  /** How often (ms or e.g. `'15s'`) some worker in the fleet scans for stalled runs. Default `lockMs / 2`. */
  stalledIntervalMs?: Duration;
  /** Times a run may stall (be recovered from a dead worker) before it fails for good. Default 3. */
  maxStalls?: number;
  /** On shutdown, how long (ms or e.g. `'30s'`) in-flight runs may take to finish before they are handed back. Default 30 s. */
  shutdownTimeoutMs?: Duration;
  /**
   * Store each attempt's step timeline with its outcome (run fields `tl:<attempt mod 50>…`, no
   * extra Redis command; ~20 bytes plus ~10 per call): what `QueueClient.timeline` and the
   * dashboard show. `false` saves those bytes per run. Default `true`.
   */
  timeline?: boolean;
}

/** `QueueModuleOptions.defaults`: run settings that apply where the workflow or the enqueue gives none. */
export interface RunDefaults {
  /** Attempts per run unless the workflow or the enqueue call says otherwise. Default 3. */
  attempts?: number;
  /** Backoff between attempts unless the workflow says otherwise. Default 1 s doubling up to 1 h. */
  backoff?: BackoffOptions;
  /** How long a finished run's record (result or error) is kept. Default 24 h. */
  resultTtlMs?: number;
}

/** Options of `QueueModule.forRoot` (or what a `forRootAsync` factory returns). */
export interface QueueModuleOptions {
  /**
   * One Redis server (fields or an ioredis instance), or a Redis Cluster: `{ cluster: [{ host,
   * port }, …], username?, password?, tls?, natMap? }` or an ioredis `Cluster` instance, or a
   * primary behind Redis Sentinel: `{ sentinels: [{ host, port }, …], name, … }` or an ioredis
   * instance made for Sentinel (see docs/connections.md).
   */
  connection: RedisConnectionOptions | Redis | RedisClusterConnectionOptions | RedisSentinelConnectionOptions | Cluster;
  /** First part of every key's hash tag. Default `'sluice'`. */
  prefix?: string;
  /** Isolates one set of workflows and runs; one Redis Cluster slot each. Default `'default'`. */
  namespace?: string;
  /**
   * Namespace cap: runs of all workflows of the namespace active at once, fleet-wide. Written to
   * Redis by worker processes at bootstrap (the latest wins; a value set at runtime with
   * `QueueClient.setLimits` stays until this declaration changes); omit for no cap.
   */
  concurrency?: number;
  /** This process's worker: whether it runs workflows, its concurrency, lease and shutdown; see {@link WorkerOptions}. */
  worker?: WorkerOptions;
  /** Attempts, backoff and result retention where the workflow or the enqueue gives none; see {@link RunDefaults}. */
  defaults?: RunDefaults;
  /** Largest encoded input, step result or run result, in bytes. Default 1 MiB. */
  maxPayloadBytes?: number;
  /** Largest total of a run's persisted step results, in bytes: a step past it fails the run. Default 16 MiB. */
  maxRunMemoBytes?: number;
  /**
   * Bound of every call to Redis (ms or e.g. `'10s'`): a call that cannot be sent within it rejects
   * with `RedisUnavailableError` (nothing changed), one whose reply does not come within it with
   * `OutcomeUnknownError` (it may have run), and the connection is replaced. Default 10 s.
   */
  redisTimeoutMs?: Duration;
  /**
   * Enqueue fast path: a run that is due now, with nothing queued ahead of it and room under its
   * caps, is claimed by the enqueue call itself and handed straight to a waiting worker, saving
   * the worker a round trip. The run's lease is that worker's `worker.lockMs`. Default `true`.
   */
  fastPath?: boolean;
  /**
   * Store new runs as lean records (layout 4: fields a reader derives left out, about 120 bytes
   * less Redis memory per waiting run) even in a namespace at layout 3. A namespace at layout 4
   * (every new one, or one moved with `migrate({ to: 4 })`) stores them anyway.
   * Every process of this version reads both forms, but older versions (0.1.0 included) cannot
   * claim a lean record: turn it on only once none shares the namespace (docs/upgrades.md).
   * Default `false`.
   */
  compactRunRecords?: boolean;
  /**
   * Migrate the namespace's Redis data to this version's key layout at bootstrap (see
   * `QueueClient.migrate`): before the worker starts, and in producer-only processes too. One
   * process of a fleet migrates; the others wait for it, then pay one GET. `false` leaves it to
   * a deploy step (`nest-sluice migrate --url … --namespace …`, or `QueueClient.migrate()`): the
   * bootstrap then only reads the layout (one GET), fails on a layout newer than this version
   * knows (`QueueConfigError`) and warns about an older one. Default `true`.
   */
  migrate?: boolean;
  /**
   * OpenTelemetry spans, metrics and trace propagation, emitted when `@opentelemetry/api` is
   * installed (an optional peer dependency). `{ enabled: false }` turns them off. Default on.
   */
  telemetry?: TelemetryOptions;
  /**
   * Make the boot checks' data-loss warning an error: a Redis whose `maxmemory-policy` may evict
   * any key (`allkeys-*`) fails the bootstrap with `QueueConfigError` instead of logging a
   * warning. A Redis older than the minimum version fails the bootstrap either way. Default `false`.
   */
  strict?: boolean;
  /** What is logged, and at which level; see {@link LoggingOptions}. */
  logging?: LoggingOptions;
}

export interface ResolvedQueueOptions {
  connection: QueueModuleOptions['connection'];
  /** The cluster `connection` names, checked and normalised; undefined for a single server. */
  cluster?: ClusterSettings;
  /** ioredis's fields for the Sentinel `connection` names, checked; undefined otherwise. */
  sentinel?: RedisOptions;
  prefix: string;
  namespace: string;
  concurrency?: number;
  worker: { [K in keyof WorkerOptions]-?: Exclude<WorkerOptions[K], string> };
  defaults: { attempts: number; backoff: Required<BackoffOptions>; resultTtlMs: number };
  maxPayloadBytes: number;
  maxRunMemoBytes: number;
  redisTimeoutMs: number;
  fastPath: boolean;
  compactRunRecords: boolean;
  migrate: boolean;
  telemetry: ResolvedTelemetryOptions;
  strict: boolean;
  logging: ResolvedLoggingOptions;
}

export const DEFAULT_BACKOFF: Required<BackoffOptions> = { delayMs: 1_000, factor: 2, maxDelayMs: 3_600_000 };

// The keys of Sluice's own option objects: any other is refused with InvalidOptionError (see
// checkOptionKeys). Not `connection`: its fields object mirrors ioredis's options, which users
// bring with keys of their own, and an ioredis instance has many keys; only a cluster
// connection, a shape of Sluice's own, is checked (clusterSettings), its `tls` and `natMap`
// values (ioredis's) excepted.
const MODULE_OPTIONS: readonly string[] = [
  'connection',
  'prefix',
  'namespace',
  'concurrency',
  'worker',
  'defaults',
  'maxPayloadBytes',
  'maxRunMemoBytes',
  'redisTimeoutMs',
  'fastPath',
  'compactRunRecords',
  'migrate',
  'telemetry',
  'strict',
  'logging',
];
const WORKER_OPTIONS: readonly string[] = [
  'enabled',
  'concurrency',
  'lockMs',
  'stalledIntervalMs',
  'maxStalls',
  'shutdownTimeoutMs',
  'timeline',
];
const RUN_DEFAULTS: readonly string[] = ['attempts', 'backoff', 'resultTtlMs'];

/**
 * Fills defaults and checks every option, so a misconfiguration fails the bootstrap with a clear
 * message: `QueueConfigError` for a bad value, `InvalidOptionError` for an unknown key.
 * @param where names the options in the errors of unknown keys (the testing harness passes its own)
 */
export function resolveQueueOptions(options: QueueModuleOptions, where = 'QueueModule options'): ResolvedQueueOptions {
  if (!options || typeof options !== 'object') throw new QueueConfigError('QueueModule options are required');
  checkOptionKeys(options, MODULE_OPTIONS, where);
  checkOptionKeys(options.worker, WORKER_OPTIONS, `${where}.worker`);
  checkOptionKeys(options.defaults, RUN_DEFAULTS, `${where}.defaults`);
  checkOptionKeys(options.defaults?.backoff, BACKOFF_OPTIONS, `${where}.defaults.backoff`);
  const cluster = clusterSettings(options.connection);
  const sentinel = isSentinelOptions(options.connection) ? sentinelFields(options.connection) : undefined;
  if (!cluster && !sentinel) checkConnection(options.connection);
  const lockMs = positive(duration(options.worker?.lockMs ?? 30_000, 'worker.lockMs'), 'worker.lockMs');
  return {
    connection: options.connection,
    cluster,
    sentinel,
    prefix: configName(options.prefix ?? 'sluice', 'prefix'),
    namespace: configName(options.namespace ?? 'default', 'namespace'),
    concurrency: options.concurrency === undefined ? undefined : positive(options.concurrency, 'concurrency'),
    worker: {
      enabled: flag(options.worker?.enabled ?? true, 'worker.enabled'),
      concurrency: positive(options.worker?.concurrency ?? 10, 'worker.concurrency'),
      lockMs,
      stalledIntervalMs: positive(
        duration(options.worker?.stalledIntervalMs ?? Math.ceil(lockMs / 2), 'worker.stalledIntervalMs'),
        'worker.stalledIntervalMs',
      ),
      maxStalls: nonNegative(options.worker?.maxStalls ?? 3, 'worker.maxStalls'),
      shutdownTimeoutMs: duration(options.worker?.shutdownTimeoutMs ?? 30_000, 'worker.shutdownTimeoutMs'),
      timeline: flag(options.worker?.timeline ?? true, 'worker.timeline'),
    },
    defaults: {
      attempts: positive(options.defaults?.attempts ?? 3, 'defaults.attempts'),
      backoff: resolveBackoff(options.defaults?.backoff, DEFAULT_BACKOFF, 'defaults.backoff'),
      resultTtlMs: positive(options.defaults?.resultTtlMs ?? 86_400_000, 'defaults.resultTtlMs'),
    },
    maxPayloadBytes: positive(options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES, 'maxPayloadBytes'),
    maxRunMemoBytes: positive(options.maxRunMemoBytes ?? DEFAULT_MAX_MEMO_BYTES, 'maxRunMemoBytes'),
    redisTimeoutMs: positive(duration(options.redisTimeoutMs ?? 10_000, 'redisTimeoutMs'), 'redisTimeoutMs'),
    fastPath: flag(options.fastPath ?? true, 'fastPath'),
    compactRunRecords: flag(options.compactRunRecords ?? false, 'compactRunRecords'),
    migrate: flag(options.migrate ?? true, 'migrate'),
    telemetry: resolveTelemetryOptions(options.telemetry, `${where}.telemetry`),
    strict: flag(options.strict ?? false, 'strict'),
    logging: resolveLoggingOptions(options.logging, `${where}.logging`),
  };
}

export function resolveBackoff(
  backoff: BackoffOptions | undefined,
  fallback: Required<BackoffOptions>,
  field: string,
): Required<BackoffOptions> {
  if (!backoff) return fallback;
  return {
    delayMs: nonNegative(backoff.delayMs, `${field}.delayMs`),
    factor: positive(backoff.factor ?? fallback.factor, `${field}.factor`, false),
    maxDelayMs: nonNegative(backoff.maxDelayMs ?? fallback.maxDelayMs, `${field}.maxDelayMs`),
  };
}

/**
 * An empty connection would silently mean 127.0.0.1:6379 — e.g. `{ url: process.env.REDIS_URL }`
 * with the variable unset — so one of url, host or port must be given.
 */
function checkConnection(connection: unknown): void {
  if (!connection || typeof connection !== 'object') {
    throw new QueueConfigError(
      'QueueModule options.connection is required: { url } / { host, port } / { cluster: [...] } or an ioredis instance',
    );
  }
  const user = userRedisInstance(connection);
  if (user) {
    if (user.options?.keyPrefix) {
      throw new QueueConfigError(
        `options.connection: an ioredis instance with keyPrefix "${user.options.keyPrefix}" is not supported (Sluice's scripts build keys a prefix would not reach); use the prefix option instead`,
      );
    }
    return;
  }
  const fields = connection as RedisConnectionOptions;
  if (fields.url === undefined && fields.host === undefined && fields.port === undefined) {
    throw new QueueConfigError(
      'options.connection has no url, host or port (is the environment variable behind it unset?); give { url } or { host, port }',
    );
  }
  if (fields.url !== undefined && (typeof fields.url !== 'string' || !/^rediss?:\/\/./.test(fields.url))) {
    throw new QueueConfigError(`options.connection.url must be a redis:// or rediss:// URL, got ${JSON.stringify(fields.url)}`);
  }
}

function duration(value: Duration, field: string): number {
  try {
    return toMilliseconds(value, field);
  } catch (error) {
    throw new QueueConfigError((error as Error).message);
  }
}

function configName(value: string, field: string): string {
  try {
    return checkName(value, field);
  } catch (error) {
    throw new QueueConfigError((error as Error).message);
  }
}

function flag(value: boolean, field: string): boolean {
  if (typeof value !== 'boolean') throw new QueueConfigError(`${field} must be true or false, got ${String(value)}`);
  return value;
}

function positive(value: number, field: string, integer = true): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new QueueConfigError(`${field} must be a positive ${integer ? 'integer' : 'number'}, got ${String(value)}`);
  }
  return value;
}

function nonNegative(value: number, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new QueueConfigError(`${field} must be an integer >= 0, got ${String(value)}`);
  }
  return value;
}
