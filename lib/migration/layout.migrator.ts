import { randomBytes } from 'node:crypto';
import { InvalidOptionError, MigrationLockLostError, MigrationTimeoutError, QueueConfigError } from '../errors';
import { MigrationLock } from '../redis/commands/migrate-lock.command';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import type { CallOptions, RedisLink } from '../redis/redis.link';
import { CURRENT_LAYOUT, MIGRATION_STEPS, ROLLING_LAYOUT } from './layout.versions';
import type { MigrationContext } from './migration.step';
import { jitteredPause } from '../util/retry';

/** What `QueueClient.migrate` (and the `nest-sluice migrate` command) did. */
export interface MigrationResult {
  /**
   * The layout this call found the namespace at. A namespace without a `schema` key is at layout
   * 1 if it holds any key, else it is fresh and simply stamped (`from` = `to`). A call that waited
   * for another process's migration reports what it read before (an unmarked namespace as 1).
   */
  from: number;
  /**
   * The layout the namespace is at now: the one asked for, else {@link ROLLING_LAYOUT} for a
   * namespace that holds data (or whatever newer layout it was at) and {@link CURRENT_LAYOUT} for
   * a new one.
   */
  to: number;
  /** Whether this call moved data to a newer layout (`false`: already current, fresh, or another process did it). */
  migrated: boolean;
}

/** Where the migrator reports what it does: Nest's `Logger`, or the console in the bin. */
export interface MigrationLogger {
  log(message: string): void;
  warn(message: string): void;
}

/** What a `migrate()` call may ask for. */
export interface MigrateOptions {
  /**
   * The layout to move the namespace to, from {@link ROLLING_LAYOUT} to {@link CURRENT_LAYOUT}.
   * Default: {@link ROLLING_LAYOUT} for a namespace that holds data, {@link CURRENT_LAYOUT} for a
   * new one. Ask for 4 only once no process older than this version shares the namespace: older
   * versions cannot read its lean run records (and refuse to start on it). A namespace already
   * at or past it is left as it is.
   */
  to?: number;
}

export interface LayoutMigratorOptions {
  /** Longest wait for another process's migration before `MigrationTimeoutError`. Default 60 s. */
  waitTimeoutMs?: number;
  /** Time to live of the migration lock, renewed every third of it while migrating. Default 15 s. */
  lockTtlMs?: number;
}

/** Keys one of which exists in any namespace a layout-1 worker or its caps touched: checked before a SCAN. */
const SENTINELS = ['workflows', 'limits', 'leases', 'seq', 'turn', 'stall-gate', 'orphans'];
/** Keys looked at per SCAN call when a namespace has no `schema` key and none of the sentinels. */
const SCAN_COUNT = 1_000;
const MAX_POLL_MS = 1_000;

/**
 * Moves a namespace's Redis data from any older key layout to {@link CURRENT_LAYOUT}, and
 * records it in the namespace's `schema` key. A plain class over a {@link LuaScripts} and the
 * command {@link RedisLink}, used by `QueueClient.migrate()`, the module's bootstrap
 * (`MigrationRunner`) and the `nest-sluice migrate` bin.
 *
 * - Current namespace: one GET of `schema`, nothing else.
 * - Newer layout than this version knows (or a `schema` that is not a number): `QueueConfigError`
 *   naming both layouts; nothing is written.
 * - Older or unmarked: under the namespace's migration lock (`migrate-lock`, SET NX PX with a
 *   token of this call, renewed every third of its TTL, released with a token check) the steps
 *   run one after another, each in bounded script calls that check the token, and `schema` is
 *   set after each. A process that finds the lock taken polls (one script call: read `schema`,
 *   take the lock if it is free, e.g. after its holder died) until `schema` is current, for at
 *   most `waitTimeoutMs` ({@link MigrationTimeoutError}). Every step is idempotent, so a
 *   migration cut short anywhere is finished by the next call.
 */
export class LayoutMigrator {
  private readonly waitTimeoutMs: number;
  private readonly lockTtlMs: number;

  constructor(
    private readonly scripts: LuaScripts,
    private readonly link: RedisLink,
    private readonly keys: RedisKeys,
    private readonly logger: MigrationLogger,
    options: LayoutMigratorOptions = {},
  ) {
    this.waitTimeoutMs = options.waitTimeoutMs ?? 60_000;
    this.lockTtlMs = options.lockTtlMs ?? 15_000;
  }

  /**
   * Reads the namespace's layout: one GET. `undefined` when there is no `schema` key.
   * @throws QueueConfigError for a layout newer than this version knows, or a malformed one
   */
  async check(options: Pick<CallOptions, 'failFast'> = {}): Promise<number | undefined> {
    const value = await this.link.call('migrate', (redis) => redis.get(this.keys.schema), { idempotent: true, failFast: options.failFast });
    return this.parse(value);
  }

  /**
   * Brings the namespace to layout `options.to` (default: {@link ROLLING_LAYOUT} for a namespace
   * that holds data, {@link CURRENT_LAYOUT} for a new one; see the class comment); safe to call
   * any number of times, from any number of processes at once.
   * @param options.failFast the first read gives up at the connection's first error (bootstrap)
   * @param options.layout a {@link check} started already (the bootstrap sends it with the server check), read instead of a new one
   */
  async migrate(
    options: Pick<CallOptions, 'failFast'> & MigrateOptions & { layout?: Promise<number | undefined> } = {},
  ): Promise<MigrationResult> {
    const asked = checkTarget(options.to);
    const found = await (options.layout ?? this.check(options));
    const target = asked ?? ROLLING_LAYOUT;
    if (found !== undefined && found >= target) return { from: found, to: found, migrated: false };
    const token = randomBytes(12).toString('base64url');
    const lock = new MigrationLock(this.scripts, this.keys, token);
    const started = Date.now();
    for (let attempt = 0; ; attempt++) {
      const { taken, schema } = await lock.acquire(this.lockTtlMs, target);
      const layout = this.parse(schema);
      if (layout !== undefined && layout >= target) return { from: found ?? 1, to: layout, migrated: false };
      if (taken) return await this.migrateLocked(lock, token, layout, target, asked ?? CURRENT_LAYOUT);
      if (attempt === 0) this.logger.log(`Waiting for another process's migration of ${this.keys.base} to key layout ${target}`);
      const waited = Date.now() - started;
      if (waited >= this.waitTimeoutMs) throw new MigrationTimeoutError(this.keys.base, waited);
      const pause = Math.min(jitteredPause(attempt, 50, MAX_POLL_MS), this.waitTimeoutMs - waited);
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }

  /** `target`: where a namespace holding data goes; `fresh`: where a new one starts. */
  private async migrateLocked(
    lock: MigrationLock,
    token: string,
    layout: number | undefined,
    target: number,
    fresh: number,
  ): Promise<MigrationResult> {
    let lost = false;
    let renewing = false;
    const renewal = setInterval(
      () => {
        if (renewing) return;
        renewing = true;
        lock
          .renew(this.lockTtlMs, { timeoutMs: Math.ceil(this.lockTtlMs / 3) })
          .then(
            (held) => void (held || (lost = true)),
            () => undefined,
          )
          .finally(() => (renewing = false));
      },
      Math.ceil(this.lockTtlMs / 3),
    );
    renewal.unref();
    const context: MigrationContext = {
      scripts: this.scripts,
      link: this.link,
      keys: this.keys,
      token,
      checkLock: () => {
        if (lost) throw new MigrationLockLostError(this.keys.base);
      },
    };
    try {
      const from = layout ?? ((await this.holdsData(context)) ? 1 : undefined);
      if (from === undefined) {
        await this.stamp(lock, fresh);
        this.logger.log(`Namespace ${this.keys.base} is new: marked with key layout ${fresh}`);
        return { from: fresh, to: fresh, migrated: false };
      }
      this.logger.log(`Migrating namespace ${this.keys.base} from key layout ${from} to ${target}`);
      for (const step of MIGRATION_STEPS.filter((s) => s.from >= from && s.to <= target)) {
        const stepStarted = Date.now();
        await step.run(context);
        context.checkLock();
        await this.stamp(lock, step.to);
        this.logger.log(
          `Migrated namespace ${this.keys.base} from key layout ${step.from} to ${step.to} in ${Date.now() - stepStarted} ms: ${step.description}`,
        );
      }
      return { from, to: target, migrated: true };
    } finally {
      clearInterval(renewal);
      // Best effort: a lock left behind lapses after its TTL, and `schema` already says what was done.
      await lock.release({ timeoutMs: Math.ceil(this.lockTtlMs / 3) }).catch(() => undefined);
    }
  }

  /** Whether a namespace without a `schema` key holds any key: the sentinels first, else SCAN in bounded pages. */
  private async holdsData(context: MigrationContext): Promise<boolean> {
    const { base } = this.keys;
    const sentinels = SENTINELS.map((suffix) => base + suffix);
    if ((await this.link.call('migrate', (redis) => redis.exists(...sentinels), { idempotent: true })) > 0) return true;
    const own = new Set([this.keys.schema, this.keys.migrateLock]);
    let cursor = '0';
    do {
      context.checkLock();
      const [next, found] = await this.link.call('migrate', (redis) => redis.scan(cursor, 'MATCH', `${base}*`, 'COUNT', SCAN_COUNT), {
        idempotent: true,
      });
      if (found.some((key) => !own.has(key))) return true;
      cursor = next;
    } while (cursor !== '0');
    return false;
  }

  private async stamp(lock: MigrationLock, layout: number): Promise<void> {
    if (!(await lock.stamp(layout))) throw new MigrationLockLostError(this.keys.base);
  }

  private parse(value: string | null): number | undefined {
    if (value === null || value === '') return undefined;
    if (!/^[1-9]\d{0,8}$/.test(value)) {
      throw new QueueConfigError(
        `${this.keys.schema} holds ${JSON.stringify(value)}, not a key layout number; this version of nest-sluice knows layouts 1 to ${CURRENT_LAYOUT}`,
      );
    }
    const layout = Number(value);
    if (layout > CURRENT_LAYOUT) {
      throw new QueueConfigError(
        `Namespace ${this.keys.base} is at key layout ${layout}, newer than layout ${CURRENT_LAYOUT}, the newest this version of nest-sluice knows: ` +
          'a newer version migrated it. Upgrade nest-sluice in this process (or use another namespace); nothing was written',
      );
    }
    return layout;
  }
}

/** `to` checked: a layout this version can move a namespace to, or undefined for the default. */
function checkTarget(to: number | undefined): number | undefined {
  if (to === undefined) return undefined;
  if (!Number.isInteger(to) || to < ROLLING_LAYOUT || to > CURRENT_LAYOUT) {
    throw new InvalidOptionError('migrate.to', `must be a key layout from ${ROLLING_LAYOUT} to ${CURRENT_LAYOUT}, got ${String(to)}`);
  }
  return to;
}
