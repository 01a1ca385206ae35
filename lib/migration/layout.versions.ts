import { groupDueStep } from './group-due.step';
import { leanRecordsStep } from './lean-records.step';
import type { MigrationStep } from './migration.step';
import { scheduleIndexStep } from './schedule-index.step';

/**
 * The key layout this version of Sluice reads and writes, recorded in each namespace's `schema`
 * key by `migrate()`.
 *
 * | layout | released in | changes |
 * |---|---|---|
 * | 1 | 0.1.0 (commit 8710ae8) | — (no `schema` key) |
 * | 2 | — (the hardening work, not released alone) | run fields `nonce`, `ended`; keys `call:<id>`, `orphans`; `groupDue`/`groupDueExact` in `wf:<name>:stats` |
 * | 3 | the schedules release | cron schedules: `schedule:<id>`, `schedules`, `wf:<name>:{schedules,next-fires,declared,sweep}`; run field `schedule` |
 * | 4 | the performance release | lean run records: fields at their default left out, `createdAt` of a generated id carried by the id (lua/includes/records.lua); not readable by older versions |
 */
export const CURRENT_LAYOUT = 4;

/**
 * The newest layout older releases (0.1.0 on) can share a namespace with. A namespace that holds
 * data is moved no further than this unless asked (`migrate({ to: 4 })`, `nest-sluice migrate
 * --to 4`): a rolling deploy of this version beside older processes stays safe. A new namespace
 * starts at {@link CURRENT_LAYOUT}: no older process has used it.
 */
export const ROLLING_LAYOUT = 3;

/** The first layout whose new runs are stored as lean records (lua/includes/records.lua reads `schema` the same way). */
export const LEAN_RECORDS_LAYOUT = 4;

/** The steps from layout 1 up to {@link CURRENT_LAYOUT}, in order: step i moves layout i + 1 to i + 2. */
export const MIGRATION_STEPS: readonly MigrationStep[] = [groupDueStep, scheduleIndexStep, leanRecordsStep];
