import { SluiceError } from './sluice.error';

/**
 * `migrate()` waited `waitedMs` for another process's migration of the namespace (it holds the
 * namespace's migration lock) and gave up: the migration may still be running. Nothing was
 * written by this call; calling `migrate()` again is safe. At bootstrap, the module logs it and
 * starts the worker once the namespace is migrated.
 */
export class MigrationTimeoutError extends SluiceError {
  constructor(
    /** The namespace's key base, e.g. `{sluice:shop}:`. */
    readonly base: string,
    /** How long this call waited for the lock, in ms. */
    readonly waitedMs: number,
  ) {
    super(
      `Namespace ${base} is being migrated by another process (it holds ${base}migrate-lock); gave up waiting after ${waitedMs} ms. Calling migrate() again is safe`,
    );
  }
}

/**
 * This process lost the namespace's migration lock part-way (it could not renew it in time, e.g.
 * Redis was away, and another process took it over): it stopped, and the writes it still tried
 * were refused. The migration steps are idempotent, so whichever process holds the lock next
 * finishes the work; calling `migrate()` again is safe.
 */
export class MigrationLockLostError extends SluiceError {
  constructor(
    /** The namespace's key base, e.g. `{sluice:shop}:`. */
    readonly base: string,
  ) {
    super(
      `Lost the migration lock of namespace ${base} part-way (another process may have taken it over); calling migrate() again is safe`,
    );
  }
}
