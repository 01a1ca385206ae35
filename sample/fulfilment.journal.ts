import { Injectable, Logger } from '@nestjs/common';

interface Entry {
  orderId: string;
  attempt: number;
  event: string;
}

/**
 * What actually executed, in order: the sample logs it as it happens and checks it afterwards
 * (a finished step must not execute again on a retry). Also tracks how many runs are in flight
 * at once, to show the workflow's fleet-wide `concurrency` cap.
 */
@Injectable()
export class FulfilmentJournal {
  private readonly logger = new Logger('OrderWorkflow');
  private readonly entries: Entry[] = [];
  private inFlight = 0;
  maxInFlight = 0;

  record(orderId: string, attempt: number, event: string): void {
    this.entries.push({ orderId, attempt, event });
    this.logger.log(`${orderId.padEnd(6)} attempt ${attempt}: ${event}`);
  }

  /** The attempts in which `event` happened for this order, e.g. `[1, 2]`. */
  attemptsOf(orderId: string, event: string): number[] {
    return this.entries.filter((e) => e.orderId === orderId && e.event === event).map((e) => e.attempt);
  }

  /** Order ids in the order their first attempt started. */
  startOrder(): string[] {
    return this.entries.filter((e) => e.event === 'run started' && e.attempt === 1).map((e) => e.orderId);
  }

  enter(): void {
    this.maxInFlight = Math.max(this.maxInFlight, ++this.inFlight);
  }

  leave(): void {
    this.inFlight--;
  }
}
