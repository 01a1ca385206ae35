import { MigrationLockLostError } from '../errors';
import { migrateLeanRecords } from '../redis/commands/migrate-lean-records.command';
import type { MigrationContext, MigrationStep } from './migration.step';

/**
 * Layout 3 → 4. Layout 4 stores lean run records (lua/includes/records.lua): no field a reader of
 * this version derives. New runs get them once the namespace is at 4; this step rewrites the
 * records already there, one SCAN page (500 keys) per script call (lua/migrate-lean-records.lua).
 * Older versions cannot read a lean record, which is why 4 is an opt-in layout (see
 * {@link ROLLING_LAYOUT}).
 */
export const leanRecordsStep: MigrationStep = {
  from: 3,
  to: 4,
  description: 'store lean run records (fields at their default left out)',
  async run({ scripts, keys, token, checkLock }: MigrationContext): Promise<void> {
    let cursor = '0';
    do {
      checkLock();
      const batch = await migrateLeanRecords(scripts, keys, token, cursor);
      if (!batch.held) throw new MigrationLockLostError(keys.base);
      cursor = batch.next;
    } while (cursor !== '0');
  },
};
