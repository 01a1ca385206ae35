import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { NonRetryableError } from '../lib';
import { latency } from './inventory.service';

/** A transient failure: worth retrying. */
export class GatewayTimeoutError extends Error {
  override name = 'GatewayTimeoutError';
}

export interface Charge {
  id: string;
  amountCents: number;
}

/**
 * A stand-in for a payment provider's sandbox. Test cards:
 * - `tok_visa`: charges fine;
 * - `tok_flaky`: the first charge attempt of each invoice times out (nothing is charged), later ones succeed;
 * - `tok_declined`: declined — a `NonRetryableError`, so the run fails at once despite `attempts: 3`.
 */
@Injectable()
export class PaymentGateway {
  private readonly attempts = new Map<string, number>();
  private readonly charges = new Map<string, Charge[]>();

  async charge(invoiceNo: string, card: string, amountCents: number): Promise<Charge> {
    await latency(50);
    const attempt = (this.attempts.get(invoiceNo) ?? 0) + 1;
    this.attempts.set(invoiceNo, attempt);
    if (card === 'tok_declined') throw new NonRetryableError(`card declined for invoice ${invoiceNo}`);
    if (card === 'tok_flaky' && attempt === 1) throw new GatewayTimeoutError(`payment gateway timed out charging invoice ${invoiceNo}`);
    const charge = { id: `ch_${randomUUID().slice(0, 8)}`, amountCents };
    this.charges.set(invoiceNo, [...(this.charges.get(invoiceNo) ?? []), charge]);
    return charge;
  }

  /** Charges that went through for an invoice: the sample checks each order was charged exactly once. */
  chargesFor(invoiceNo: string): number {
    return this.charges.get(invoiceNo)?.length ?? 0;
  }
}
