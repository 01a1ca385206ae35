import { Workflow } from '../lib';

/** Start times (ms) of each tenant's syncs, for the demo's check. */
export const syncStarts = new Map<string, number[]>();

/**
 * Syncs a tenant with a partner API that allows each tenant 2 calls a second: a rate limit per
 * group (`groupRateLimit`, BullMQ Pro's group rate limit), fleet-wide, held in Redis.
 */
@Workflow('tenant.sync', { groupRateLimit: { max: 2, perMs: 1_000 } })
export class TenantSyncWorkflow {
  async run(input: { tenant: string }) {
    const starts = syncStarts.get(input.tenant) ?? [];
    starts.push(Date.now());
    syncStarts.set(input.tenant, starts);
    return { synced: input.tenant };
  }
}
