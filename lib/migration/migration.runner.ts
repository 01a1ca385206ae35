import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { MigrationLockLostError, MigrationTimeoutError, RedisConnectionError } from '../errors';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import { RedisServerCheck } from '../redis/redis-server.check';
import { retryInBackground } from '../util/retry';
import { OutageLog } from '../util/outage-log';
import { LayoutMigrator } from './layout.migrator';
import { CURRENT_LAYOUT, ROLLING_LAYOUT } from './layout.versions';
import { NamespaceLayout } from './namespace.layout';

/** Retry pauses of a producer-only process whose bootstrap could not migrate: doubling, jittered, up to this. */
const MAX_RETRY_PAUSE_MS = 10_000;

/**
 * Migrates the namespace at `onApplicationBootstrap`, once per process (see `LayoutMigrator`),
 * unless the option `migrate` is `false` (then it only reads the layout: a newer one fails the
 * bootstrap, an older one is a warning).
 *
 * Nest runs the bootstrap hooks of a module's providers side by side, so the worker does not rely
 * on provider order: `WorkerOrchestrator` awaits {@link atBootstrap}, the same promise as this
 * provider's own hook, before it writes caps or starts.
 *
 * If Redis does not answer at bootstrap (or another process's migration outlasts the wait), the
 * bootstrap does not fail: it logs a warning and goes on. A worker process then retries through
 * {@link ensure} before its worker starts (`WorkerOrchestrator.startWhenRedisAnswers`); a
 * producer-only process retries here in the background, with jittered backoff up to 10 s. Its
 * enqueues meanwhile work on the older layout (see docs/upgrades.md). A layout newer than this
 * version knows fails the bootstrap with `QueueConfigError`.
 */
@Injectable()
export class MigrationRunner implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Sluice');
  private migratorInstance?: LayoutMigrator;
  private bootstrapped?: Promise<boolean>;
  private attempt?: Promise<void>;
  private done = false;
  private stopped = false;

  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly registry: WorkflowRegistry,
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScriptsProvider,
    private readonly serverCheck: RedisServerCheck,
    private readonly namespaceLayout: NamespaceLayout,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.atBootstrap();
  }

  beforeApplicationShutdown(): void {
    this.stopped = true;
  }

  /**
   * The bootstrap's migration, started once and shared by every caller: resolves `true` once the
   * namespace is at the current layout (or, with `migrate: false`, was checked), `false` if it
   * could not be done now (Redis away, or another process's migration still running) and is
   * retried later. Rejects with `QueueConfigError` for a newer layout, and with any other
   * unexpected error.
   */
  atBootstrap(): Promise<boolean> {
    return (this.bootstrapped ??= this.bootstrap());
  }

  /**
   * Migrates (or checks) if that has not succeeded yet in this process; concurrent callers share
   * one attempt. Rejects like `QueueClient.migrate()` when the attempt fails.
   */
  ensure(failFast = false): Promise<void> {
    if (this.done) return Promise.resolve();
    return (this.attempt ??= this.run(failFast).finally(() => (this.attempt = undefined)));
  }

  private async bootstrap(): Promise<boolean> {
    try {
      // Fail fast when Redis refuses connections, so an app without Redis still boots at once.
      await this.ensure(true);
      return true;
    } catch (error) {
      if (!deferrable(error)) {
        // The bootstrap fails. Nest's app.close() then rethrows the bootstrap error without running
        // the shutdown hooks, so close the connections here: a process that catches the error must
        // still be able to exit.
        await this.connections.onApplicationShutdown().catch(() => undefined);
        throw error;
      }
      const worker = this.options.worker.enabled && this.registry.all().length > 0;
      this.logger.warn(
        `Key layout migration of ${this.options.namespace} deferred (${(error as Error).message}); ` +
          (worker ? 'the worker starts once it is done' : 'retrying in the background'),
      );
      if (!worker) void this.retryLater();
      return false;
    }
  }

  /** Made on first use: the scripts are read from disk then, as everywhere else (no I/O at init). */
  private get migrator(): LayoutMigrator {
    return (this.migratorInstance ??= createMigrator(this.options, this.connections, this.scripts, this.logger));
  }

  private async run(failFast: boolean): Promise<void> {
    // The server's boot checks come first, as the first Redis work of every process: an
    // unsupported Redis fails here with a clear QueueConfigError rather than in a script. Only
    // the bootstrap passes failFast, so it also tells a refusal that fails the bootstrap. The
    // layout's read (a GET, harmless on any server) goes out with the check's reads, in the same
    // round trip, and is looked at only once the server passed.
    const checked = this.serverCheck.ensure(failFast, failFast);
    const read = this.migrator.check({ failFast });
    read.catch(() => undefined); // a refused server's verdict is what fails; the read's own error, if any, surfaces below
    await checked;
    const layout = this.options.migrate ? (await this.migrator.migrate({ failFast, layout: read })).to : await read;
    this.namespaceLayout.found(layout);
    if ((layout ?? 1) < ROLLING_LAYOUT) {
      this.logger.warn(
        `Namespace ${this.options.namespace} is at key layout ${layout ?? '1 (or new)'}, not ${ROLLING_LAYOUT}, and migrate is false: ` +
          'run `nest-sluice migrate` (or QueueClient.migrate()) from your deploy pipeline',
      );
    } else if (layout! < CURRENT_LAYOUT) {
      this.logger.log(
        `Namespace ${this.options.namespace} is at key layout ${layout}, which older releases share. Layout ${CURRENT_LAYOUT} stores lean run records ` +
          `(about 120 bytes less Redis memory per waiting run): once no older process uses the namespace, run \`nest-sluice migrate --to ${CURRENT_LAYOUT}\` ` +
          `(or QueueClient.migrate({ to: ${CURRENT_LAYOUT} }))`,
      );
    }
    this.done = true;
  }

  /** A producer-only process: retries until the migration is done or the app shuts down; never throws. */
  private async retryLater(): Promise<void> {
    await retryInBackground(() => this.ensure(), {
      stopped: () => this.done || this.stopped,
      log: new OutageLog(this.logger),
      describe: (error) => `Key layout migration of ${this.options.namespace} still pending: ${error.message}`,
      maxPauseMs: MAX_RETRY_PAUSE_MS,
    });
  }
}

/** The migrator of a Nest app's namespace (shared by `MigrationRunner` and `QueueClient.migrate`). */
export function createMigrator(
  options: ResolvedQueueOptions,
  connections: RedisConnections,
  scripts: LuaScriptsProvider,
  logger: Logger,
): LayoutMigrator {
  const keys = new RedisKeys(options.prefix, options.namespace);
  // A lock renewal is bounded by a third of the lock's TTL: keep that above a call's own bound.
  return new LayoutMigrator(scripts.get(), connections.command, keys, logger, { lockTtlMs: Math.max(15_000, 3 * options.redisTimeoutMs) });
}

/** Errors after which the bootstrap goes on and the migration is retried later. */
export function deferrable(error: unknown): boolean {
  return error instanceof RedisConnectionError || error instanceof MigrationTimeoutError || error instanceof MigrationLockLostError;
}
