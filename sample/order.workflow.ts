import { randomUUID } from 'node:crypto';
import { RunContext, Step, Workflow } from '../lib';
import { FulfilmentJournal } from './fulfilment.journal';
import { InventoryService, Reservation } from './inventory.service';
import { Charge, PaymentGateway } from './payment.gateway';

export interface OrderInput {
  orderId: string;
  sku: string;
  quantity: number;
  amountCents: number;
  /** A sandbox card token, see PaymentGateway. */
  card: 'tok_visa' | 'tok_flaky' | 'tok_declined';
  giftWrap?: boolean;
}

export interface OrderResult {
  orderId: string;
  reservationId: string;
  invoiceNo: string;
  chargeId: string;
  trackingNo: string;
  /** The attempt that completed the run. */
  attempt: number;
}

/**
 * Order fulfilment. `run` is the orchestration and re-executes on every attempt; the three
 * `@Step` methods and the inline `ctx.step` are durable: once finished, their result is in Redis
 * and a retry gets it back without executing them again. At most 5 runs of this workflow are
 * active at once across every process on the namespace; a failed attempt is retried up to 3
 * attempts in all, 200 ms (doubling, with jitter) after a failure.
 */
@Workflow('order.fulfil', { concurrency: 5, groupConcurrency: 2, attempts: 3, backoff: { delayMs: 200 } })
export class OrderWorkflow {
  constructor(
    private readonly inventory: InventoryService,
    private readonly payments: PaymentGateway,
    private readonly journal: FulfilmentJournal,
  ) {}

  async run(order: OrderInput, ctx: RunContext): Promise<OrderResult> {
    this.journal.enter();
    try {
      this.journal.record(order.orderId, ctx.attempt, 'run started');
      const reservation = await this.reserveStock(order, ctx.attempt);
      // An inline step: the invoice number is random, yet a retry sees the same one.
      const invoiceNo = await ctx.step('invoice-number', () => {
        this.journal.record(order.orderId, ctx.attempt, 'step invoice-number executed');
        return `INV-${randomUUID().slice(0, 8).toUpperCase()}`;
      });
      const charge = await this.chargePayment(order, invoiceNo, ctx.attempt);
      const trackingNo = await this.shipOrder(order, reservation, ctx.attempt);
      return { orderId: order.orderId, reservationId: reservation.id, invoiceNo, chargeId: charge.id, trackingNo, attempt: ctx.attempt };
    } finally {
      this.journal.leave();
    }
  }

  // Step arguments are not part of the memo key (a step is identified by its name and its
  // occurrence in the run); `attempt` is passed only so the journal can say when a step executed.

  @Step()
  async reserveStock(order: OrderInput, attempt: number): Promise<Reservation> {
    this.journal.record(order.orderId, attempt, 'step reserveStock executed');
    return this.inventory.reserve(order.sku, order.quantity);
  }

  @Step()
  async chargePayment(order: OrderInput, invoiceNo: string, attempt: number): Promise<Charge> {
    this.journal.record(order.orderId, attempt, 'step chargePayment executed');
    return this.payments.charge(invoiceNo, order.card, order.amountCents);
  }

  @Step()
  async shipOrder(order: OrderInput, reservation: Reservation, attempt: number): Promise<string> {
    this.journal.record(order.orderId, attempt, 'step shipOrder executed');
    return this.inventory.ship(reservation, order.giftWrap ?? false);
  }
}
