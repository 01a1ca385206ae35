import { Injectable, Logger } from '@nestjs/common';
import { BatchContext, QueueClient, Workflow } from '../lib';
import { DemoReport } from './demo.report';

/** One line of the shop's audit log, written in bulk. */
interface AuditEntry {
  tenant: string;
  action: string;
}

/**
 * Audit entries written in bulk (docs/batches.md): each `client.run` is one entry with its own run
 * id and result, while `run` is called once per batch of up to 10 entries of one tenant — as a
 * bulk INSERT would be. `bulkWrites` counts the calls.
 */
let bulkWrites = 0;
@Workflow('sample.audit', { batch: { maxSize: 10, maxWaitMs: 500, key: (entry: AuditEntry) => entry.tenant } })
export class AuditLogWorkflow {
  async run(entries: AuditEntry[], ctx: BatchContext<AuditEntry>): Promise<Array<{ line: number }>> {
    // One memoized step for the whole batch: a retry of the batch does not write it twice.
    const first = await ctx.step('bulk-insert', () => {
      bulkWrites++;
      return bulkWrites * 1000;
    });
    return entries.map((_, i) => ({ line: first + i }));
  }
}

/** Enqueues 25 audit entries of two tenants side by side and checks they ran in a few bulk calls. Returns the failed checks. */
@Injectable()
export class BatchDemo {
  private readonly logger = new Logger('Demo');
  private readonly report = new DemoReport(this.logger);

  constructor(private readonly client: QueueClient) {}

  async runAll(): Promise<string[]> {
    this.report.section('19. batches: 25 audit entries, one handler call per batch of a tenant');
    const entries = Array.from({ length: 25 }, (_, i) => ({ tenant: i % 5 === 0 ? 'globex' : 'acme', action: `action-${i}` }));
    const results = await Promise.all(entries.map((entry) => this.client.run(AuditLogWorkflow, entry, { timeoutMs: 15_000 })));
    this.logger.log(`25 entries written in ${bulkWrites} bulk call(s)`);
    this.report.check(results.length === 25 && results.every((r) => typeof r.line === 'number'), 'each entry got its own result');
    this.report.check(
      bulkWrites >= 3 && bulkWrites < 25,
      `the handler ran once per batch (${bulkWrites} calls for 25 entries, at most 10 a call)`,
    );
    const handle = await this.client.enqueue(AuditLogWorkflow, { tenant: 'initech', action: 'login' });
    await handle.result({ timeoutMs: 15_000 });
    const member = await this.client.get(handle.id);
    const members = member?.batch ? await this.client.batchMembers(member.batch) : null;
    this.report.check(members?.length === 1 && members[0] === handle.id, 'a lone entry ran in a batch of its own once maxWaitMs passed');
    return this.report.problems;
  }
}
