import { RunContext, Workflow } from '../lib';
import { OrderInput, OrderResult, OrderWorkflow } from './order.workflow';

/** A manager's answer to `QueueClient.signal(runId, 'approval', …)`. */
export interface ApprovalDecision {
  approved: boolean;
  by: string;
}

export type ApprovalOutcome =
  { status: 'fulfilled'; approvedBy: string | null; order: OrderResult } | { status: 'rejected'; by: string } | { status: 'expired' };

/** Orders above this amount wait for a manager's approval before they are fulfilled. */
export const APPROVAL_THRESHOLD_CENTS = 50_000;

/**
 * Large orders need a manager's approval. The run waits for the `approval` signal holding no worker
 * slot (a durable wait: it could wait for days), gives up after `approvalTimeoutMs`, and fulfils
 * the order as a child run of `OrderWorkflow` — whose result it waits for, again without a slot.
 */
@Workflow('order.approve', { attempts: 3, backoff: { delayMs: 200 } })
export class OrderApprovalWorkflow {
  async run(input: { order: OrderInput; approvalTimeoutMs: number }, ctx: RunContext): Promise<ApprovalOutcome> {
    let approvedBy: string | null = null;
    if (input.order.amountCents > APPROVAL_THRESHOLD_CENTS) {
      const answer = await ctx.waitForSignal<ApprovalDecision>('approval', { timeoutMs: input.approvalTimeoutMs });
      if (answer.timedOut) return { status: 'expired' };
      if (!answer.payload.approved) return { status: 'rejected', by: answer.payload.by };
      approvedBy = answer.payload.by;
    }
    const order = await ctx.invoke(OrderWorkflow, input.order, { group: 'approved' });
    return { status: 'fulfilled', approvedBy, order };
  }
}
