import { MigrationLockLostError } from '../errors';
import { migrateScheduleIndex } from '../redis/commands/migrate-schedule-index.command';
import type { MigrationContext, MigrationStep } from './migration.step';

/**
 * Layout 2 → 3. Layout 3 added cron schedules: a canonical hash per schedule (`schedule:<id>`)
 * and, derived from the hashes, each workflow's `next-fires` index and `schedules` listing. This
 * step (re)builds the derived keys from the hashes, about 500 schedules per script call
 * (lua/migrate-schedule-index.lua). Data from layouts 1 and 2 holds no schedule, so there it
 * costs one call; it is the explicit backfill the derived index needs should a layout ever carry
 * schedule hashes without it, never a scan hidden in the firing path.
 */
export const scheduleIndexStep: MigrationStep = {
  from: 2,
  to: 3,
  description: 'build the derived schedule index (wf:<name>:next-fires) from the schedule hashes',
  async run({ scripts, keys, token, checkLock }: MigrationContext): Promise<void> {
    let cursor = '';
    do {
      checkLock();
      const batch = await migrateScheduleIndex(scripts, keys, token, cursor);
      if (!batch.held) throw new MigrationLockLostError(keys.base);
      cursor = batch.next;
    } while (cursor !== '');
  },
};
