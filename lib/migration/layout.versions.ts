import { groupDueStep } from './group-due.step';
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
 */
export const CURRENT_LAYOUT = 3;

/** The steps from layout 1 up to {@link CURRENT_LAYOUT}, in order: step i moves layout i + 1 to i + 2. */
export const MIGRATION_STEPS: readonly MigrationStep[] = [groupDueStep, scheduleIndexStep];
