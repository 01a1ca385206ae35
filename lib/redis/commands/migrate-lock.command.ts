import type { LuaScripts } from '../lua.scripts';
import type { CallOptions } from '../redis.link';
import type { RedisKeys } from '../redis.keys';

/**
 * The namespace's migration lock and its layout marker (lua/migrate-lock.lua): one process at a
 * time migrates, under a token of its own. Every operation may be repeated after a lost reply.
 */
export class MigrationLock {
  constructor(
    private readonly scripts: LuaScripts,
    private readonly keys: RedisKeys,
    private readonly token: string,
  ) {}

  /**
   * Takes the lock for `ttlMs` unless `schema` is at `layout` or past it (or holds something
   * other than a number). `schema`: what it holds, '' if nothing.
   */
  async acquire(ttlMs: number, layout: number): Promise<{ taken: boolean; schema: string }> {
    const [taken, schema] = await this.send<[number, string]>('acquire', [ttlMs, layout]);
    return { taken: taken === 1, schema };
  }

  /** Whether the token still held the lock (now renewed for `ttlMs`). */
  async renew(ttlMs: number, options?: Pick<CallOptions, 'timeoutMs'>): Promise<boolean> {
    return (await this.send<number>('renew', [ttlMs], options)) === 1;
  }

  /** Records `layout` in `schema`; whether the token held the lock (else nothing written). */
  async stamp(layout: number): Promise<boolean> {
    return (await this.send<number>('stamp', [layout])) === 1;
  }

  /** Whether the token held the lock (now deleted). */
  async release(options?: Pick<CallOptions, 'timeoutMs'>): Promise<boolean> {
    return (await this.send<number>('release', [], options)) === 1;
  }

  private send<T>(operation: 'acquire' | 'renew' | 'stamp' | 'release', args: (string | number)[], options: CallOptions = {}): Promise<T> {
    return this.scripts.run<T>('migrate-lock', [this.keys.migrateLock, this.keys.schema], [operation, this.token, ...args], {
      idempotent: true,
      ...options,
    });
  }
}
