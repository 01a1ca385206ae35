import { Injectable, Logger } from '@nestjs/common';
import { QueueClient, RunContext, Workflow } from '../lib';
import { DemoReport } from './demo.report';

const WAIT = { timeoutMs: 15_000 };

/** The payload of the sample's `order.placed` event. */
export interface OrderPlaced {
  orderId: string;
  total: number;
}

/** Subscribed to `order.placed`: every order gets a receipt. */
@Workflow('trigger.receipt', { on: 'order.placed' })
export class ReceiptWorkflow {
  async run(input: OrderPlaced, ctx: RunContext) {
    return ctx.step('send-receipt', () => `receipt for ${input.orderId} (${input.total})`);
  }
}

/** Subscribed to two events; its filter (run by the worker) skips orders under 50. */
@Workflow('trigger.loyalty', { on: ['order.placed', 'order.refunded'], filter: (order: OrderPlaced) => order.total >= 50 })
export class LoyaltyWorkflow {
  async run(input: OrderPlaced) {
    return { points: Math.floor(input.total / 10) };
  }
}

/** Waits for its order's delivery: resumed by `publish('order.delivered', …, { key: orderId })`. */
@Workflow('trigger.delivery')
export class DeliveryWorkflow {
  async run(input: { orderId: string }, ctx: RunContext) {
    const delivered = await ctx.waitForEvent<{ at: string }>('order.delivered', { key: input.orderId, timeoutMs: 60_000 });
    return delivered.timedOut ? 'not delivered' : `delivered ${delivered.payload?.at}`;
  }
}

/**
 * Event triggers: one `publish` starts a run of every subscribed workflow, idempotently by the
 * event id; a filter skips a run visibly; the same publish resumes a run waiting for the event.
 * Returns the failed checks.
 */
@Injectable()
export class TriggersDemo {
  private readonly logger = new Logger('Demo');
  private readonly report = new DemoReport(this.logger);

  constructor(private readonly client: QueueClient) {}

  async runAll(): Promise<string[]> {
    this.report.section('16. event triggers: one publish starts every subscribed workflow, once per event id');
    const placed = await this.client.publish('order.placed', { orderId: 'TR-1', total: 120 }, { id: 'order-TR-1' });
    const outcomes = await Promise.all(placed.runs.map((run) => run.result(WAIT)));
    this.logger.log(
      `published ${placed.id}: ${placed.runs.map((run, i) => `${run.workflow} → ${JSON.stringify(outcomes[i])}`).join('; ')}`,
    );
    this.report.check(
      placed.runs.map((run) => run.workflow).join() === 'trigger.loyalty,trigger.receipt' && outcomes.every((o) => o !== undefined),
      'order.placed started one run of each subscribed workflow',
    );
    const again = await this.client.publish('order.placed', { orderId: 'TR-1', total: 120 }, { id: 'order-TR-1' });
    this.report.check(
      !again.published && again.runs.every((run, i) => !run.created && run.id === placed.runs[i].id),
      'publishing the same event id again started nothing and returned the same runs',
    );

    const small = await this.client.publish('order.placed', { orderId: 'TR-2', total: 20 });
    const loyalty = small.runs.find((run) => run.workflow === 'trigger.loyalty')!;
    const skipped = await loyalty.result(WAIT);
    const steps = (await this.client.timeline(loyalty.id))?.attempts.at(-1)?.calls.map((call) => call.key) ?? [];
    this.report.check(
      skipped === undefined && steps.join() === 'event-filter#1',
      "the loyalty filter skipped a small order's run (its timeline says so)",
    );

    const delivery = await this.client.enqueue(DeliveryWorkflow, { orderId: 'TR-1' });
    await this.until(delivery.id, 'waiting-event');
    const delivered = await this.client.publish('order.delivered', { at: 'door' }, { key: 'TR-1' });
    this.report.check(
      delivered.resumed === 1 && (await delivery.result(WAIT)) === 'delivered door',
      'publish resumed the run waiting for order.delivered with that order id',
    );
    return this.report.problems;
  }

  private async until(runId: string, state: string): Promise<void> {
    for (let i = 0; i < 300 && (await this.client.get(runId))?.state !== state; i++) await new Promise((r) => setTimeout(r, 20));
  }
}
