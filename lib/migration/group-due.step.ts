import { MigrationLockLostError } from '../errors';
import { countGroupDue as countBatch, writeGroupDue } from '../redis/commands/migrate-group-due.command';
import type { MigrationContext, MigrationStep } from './migration.step';

/** Workflows read per SSCAN call of the `workflows` set. */
const WORKFLOW_PAGE = 100;

/**
 * Layout 1 → 2. Layout 2 (the hardening release) added the run-hash fields `nonce` and `ended`
 * (optional: a run without them behaves as before), the transient `call:<id>` keys and the
 * `orphans` list (created when needed), and the running count of due grouped runs per workflow
 * (`groupDue` in `wf:<name>:stats`, exact once `groupDueExact` is set). Only the count needs data:
 * this step counts each registered workflow's group lanes, about 500 groups per script call, and
 * stores the count. (stats.lua still counts lazily, once, a workflow that has no exact count, e.g.
 * one no worker registered, or one whose count a process without it disturbed.)
 */
export const groupDueStep: MigrationStep = {
  from: 1,
  to: 2,
  description: "count the due runs of each workflow's group lanes (wf:<name>:stats groupDue)",
  async run(context: MigrationContext): Promise<void> {
    for (const workflow of await registeredWorkflows(context)) await countGroupDue(context, workflow);
  },
};

async function registeredWorkflows({ link, keys, checkLock }: MigrationContext): Promise<string[]> {
  const names = new Set<string>();
  let cursor = '0';
  do {
    checkLock();
    const [next, page] = await link.call('migrate', (redis) => redis.sscan(keys.workflows, cursor, 'COUNT', WORKFLOW_PAGE), {
      idempotent: true,
    });
    page.forEach((name) => names.add(name));
    cursor = next;
  } while (cursor !== '0');
  return [...names].sort();
}

/** See lua/migrate-group-due.lua: one call if the workflow's groups fit a batch, else batches summed here. */
async function countGroupDue(context: MigrationContext, workflow: string): Promise<void> {
  const { scripts, keys, token } = context;
  const seen = new Set<string>();
  let total = 0;
  let cursor = '0';
  do {
    context.checkLock();
    const batch = await countBatch(scripts, keys, token, workflow, cursor);
    if (!batch.held) throw new MigrationLockLostError(keys.base);
    if (batch.stored) return; // the whole set fit one call, which stored the count
    for (const [group, due] of batch.groups) {
      if (seen.has(group)) continue; // SSCAN may return a group twice while the set is rehashed
      seen.add(group);
      total += due;
    }
    cursor = batch.next;
  } while (cursor !== '0');
  context.checkLock();
  if (!(await writeGroupDue(scripts, keys, token, workflow, total))) throw new MigrationLockLostError(keys.base);
}
