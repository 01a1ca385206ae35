import type { Claim } from '../redis/commands/claim.reply';

/**
 * Hands claims over in the order their calls were sent, whatever order the replies' promise
 * chains settle in. A worker may have a reserve and a refilling commit in flight at once (while
 * it holds runs ready): both replies can arrive in one read and resume at different depths, and
 * a concurrency-1 worker must still start runs in the order Redis claimed them (priority, then FIFO).
 */
export class ClaimSequencer {
  private sent = 0;
  private next = 0;
  private readonly early = new Map<number, Claim[]>();
  /** Per ticket whose claims are not launched yet, the slots its call may fill. */
  private readonly slots = new Map<number, number>();

  constructor(private readonly launch: (claim: Claim) => void) {}

  /**
   * Taken when a claiming call is sent, for the `slots` it may fill; every ticket must be
   * {@link deliver}ed, with no claims if the call failed.
   */
  ticket(slots = 0): number {
    this.slots.set(this.sent, slots);
    return this.sent++;
  }

  /**
   * Slots promised to claiming calls whose claims are not launched yet: no other call may claim
   * for them (a reserve and a complete call refilling free slots can be in flight together).
   */
  get promised(): number {
    let promised = 0;
    for (const slots of this.slots.values()) promised += slots;
    return promised;
  }

  deliver(ticket: number, claims: Claim[]): void {
    this.early.set(ticket, claims);
    for (let ready = this.early.get(this.next); ready; ready = this.early.get(this.next)) {
      this.early.delete(this.next);
      this.slots.delete(this.next++);
      ready.forEach(this.launch);
    }
  }
}
