import { Inject } from '@nestjs/common';
import { NonRetryableError, roundTrip, RunContext, Step, Stored, Workflow } from '../../lib';

/**
 * One workflow run both by the testing harness (test/unit/testing-harness.spec.ts, no Redis) and by
 * a real worker (test/e2e/testing-parity.spec.ts), so the two can be compared result for result.
 */

export const BILLING = 'BILLING';

export interface Invoice {
  id: string;
  issuedAt: Date;
}

export interface Charge {
  chargeId: string;
  at: Date;
  amount: number;
  /** Always undefined: the key is kept, as a payload keeps `undefined`. */
  receiptUrl?: string;
}

/** A billing service fake: counts its side effects and can fail the next charges. */
export class FakeBilling {
  invoices = 0;
  charges = 0;
  /** Charges that throw before taking effect, counted down. */
  failNextCharges = 0;

  async createInvoice(orderId: string): Promise<Invoice> {
    this.invoices++;
    return { id: `inv-${orderId}`, issuedAt: new Date(Date.UTC(2026, 0, 2, 3, 4, 5)) };
  }

  async charge(invoiceId: string): Promise<Charge> {
    if (this.failNextCharges > 0) {
      this.failNextCharges--;
      throw new Error(`gateway timeout charging ${invoiceId}`);
    }
    this.charges++;
    return { chargeId: `ch-${invoiceId}`, at: new Date(Date.UTC(2026, 0, 2, 3, 4, 6)), amount: 42, receiptUrl: undefined };
  }
}

export interface OrderInput {
  orderId: string;
}

@Workflow('parity.order', { attempts: 3, backoff: { delayMs: 20, factor: 2 } })
export class ParityOrderWorkflow {
  constructor(@Inject(BILLING) private readonly billing: FakeBilling) {}

  async run(input: OrderInput, ctx: RunContext) {
    const invoice = await this.createInvoice(input.orderId);
    if (input.orderId.startsWith('bad')) throw new NonRetryableError(`order ${input.orderId} is invalid`);
    // A Date inside a step result comes back a Date, on the first attempt as on a replay.
    const charge = await ctx.step('charge', () => this.billing.charge(invoice.id));
    const audit = await ctx.step('audit', async () => ({
      // A step inside a step is part of it: not memoized on its own.
      note: await ctx.step('audit.note', () => `charged ${charge.chargeId}`),
      seenAs: typeof charge.at,
    }));
    return { invoiceId: invoice.id, issuedAt: invoice.issuedAt, charge, audit, finishedAt: new Date(Date.UTC(2026, 0, 3)) };
  }

  /** The documented pattern for @Step methods: declare the round trip and return roundTrip(…). */
  @Step()
  async createInvoice(orderId: string): Promise<Stored<Invoice>> {
    return roundTrip(await this.billing.createInvoice(orderId));
  }
}
