import { Injectable, Logger } from '@nestjs/common';
import { QueueClient } from '../lib';
import { DemoReport } from './demo.report';
import { FulfilmentJournal } from './fulfilment.journal';
import { ApprovalOutcome, OrderApprovalWorkflow } from './order-approval.workflow';
import { OrderInput } from './order.workflow';

const WAIT = { timeoutMs: 15_000 };

/**
 * Durable waits: a large order waits for a manager's approval signal without holding a worker
 * slot, then fulfils the order as a child workflow. Returns the failed checks.
 */
@Injectable()
export class ApprovalDemo {
  private readonly logger = new Logger('Demo');
  private readonly report = new DemoReport(this.logger);

  constructor(
    private readonly client: QueueClient,
    private readonly journal: FulfilmentJournal,
  ) {}

  async runAll(): Promise<string[]> {
    await this.approved();
    await this.rejectedAndExpired();
    return this.report.problems;
  }

  /** A large order waits in 'waiting-signal', holding no slot, until the approval arrives. */
  private async approved(): Promise<void> {
    this.report.section('14. durable wait: a large order waits for approval, then fulfils as a child run');
    const handle = await this.client.enqueue(OrderApprovalWorkflow, { order: bigOrder('AP-800'), approvalTimeoutMs: 60_000 });
    const waiting = await this.until(handle.id, 'waiting-signal');
    this.logger.log(`run ${handle.id} is ${waiting}: ${JSON.stringify((await this.client.get(handle.id))?.waitingFor)}`);
    const stats = (await this.client.stats({ workflow: OrderApprovalWorkflow })).workflows['order.approve'];
    this.report.check(
      waiting === 'waiting-signal' && stats.waitingSignal >= 1 && stats.active === 0,
      'the run waits for the signal in Redis, holding no worker slot',
    );
    const sent = await this.client.signal(handle.id, 'approval', { approved: true, by: 'dana' });
    const outcome: ApprovalOutcome = await handle.result(WAIT);
    this.logger.log(`signal delivered: ${sent.delivered}; outcome: ${JSON.stringify(outcome)}`);
    this.report.check(
      sent.delivered && outcome.status === 'fulfilled' && outcome.approvedBy === 'dana',
      'the approval resumed the run, which fulfilled the order',
    );
    this.report.check(this.journal.attemptsOf('AP-800', 'run started').length === 1, 'the child order run ran once');
  }

  /** A rejection ends the run; an approval that never comes ends it at its timeout (a result, not an error). */
  private async rejectedAndExpired(): Promise<void> {
    this.report.section('15. durable wait: a signal sent early waits in the mailbox; a wait times out');
    const rejected = await this.client.enqueue(
      OrderApprovalWorkflow,
      { order: bigOrder('AP-801'), approvalTimeoutMs: 60_000 },
      { delayMs: 200 },
    );
    // Sent before the run reaches its wait: kept in the run's mailbox, taken when it gets there.
    const early = await this.client.signal(rejected.id, 'approval', { approved: false, by: 'lee' });
    const expired = await this.client.enqueue(OrderApprovalWorkflow, { order: bigOrder('AP-802'), approvalTimeoutMs: 300 });
    const [no, late] = await Promise.all([rejected.result(WAIT), expired.result(WAIT)]);
    this.logger.log(`early signal delivered: ${early.delivered}; outcomes: ${JSON.stringify(no)}, ${JSON.stringify(late)}`);
    this.report.check(
      !early.delivered && no.status === 'rejected' && no.by === 'lee',
      'the early rejection waited in the mailbox and was taken by the wait',
    );
    this.report.check(late.status === 'expired', 'an approval that never came ended the wait at its timeout');
    this.report.check(
      this.journal.attemptsOf('AP-801', 'run started').length + this.journal.attemptsOf('AP-802', 'run started').length === 0,
      'no order was fulfilled without approval',
    );
  }

  /** Polls the run's state (there is no event for "it started waiting" outside its worker). */
  private async until(runId: string, state: string): Promise<string | undefined> {
    for (let i = 0; i < 150; i++) {
      const info = await this.client.get(runId);
      if (info?.state === state) return state;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return (await this.client.get(runId))?.state;
  }
}

function bigOrder(orderId: string): OrderInput {
  return { orderId, sku: 'SKU-CAP', quantity: 1, amountCents: 120_000, card: 'tok_visa' };
}
