interface Pending<I, R> {
  item: I;
  resolve(result: R): void;
  reject(error: unknown): void;
}

/**
 * Coalesces calls made in the same event-loop turn into one flush: the runs that finish on one
 * batch of Redis replies commit in one script call instead of one each. The wait is a single
 * `setImmediate`, so a lone call is delayed by microseconds, not by a timer — unless `full` says
 * nothing else can join the batch (every run in flight is in it): then it goes out once the
 * current microtasks are done (`process.nextTick`), not after the rest of the turn's I/O
 * callbacks, which on a busy event loop (a worker's boot: connections opening, replies to other
 * calls) can take a millisecond.
 */
export class TickBatcher<I, R> {
  private pending: Pending<I, R>[] = [];
  private scheduled = false;
  private soon = false;

  constructor(
    private readonly flush: (items: I[]) => Promise<R[]>,
    private readonly maxBatch: number,
    private readonly full?: (pending: readonly { readonly item: I }[]) => boolean,
  ) {}

  add(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (this.pending.length >= this.maxBatch) this.run();
      else if (!this.soon && this.full?.(this.pending)) {
        this.soon = true;
        process.nextTick(() => this.run());
      } else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.run());
      }
    });
  }

  /** How many items that `match` accepts wait for this turn's flush. */
  count(match: (item: I) => boolean): number {
    let count = 0;
    for (const pending of this.pending) if (match(pending.item)) count++;
    return count;
  }

  private run(): void {
    this.scheduled = false;
    this.soon = false;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    this.flush(batch.map((p) => p.item)).then(
      (results) => batch.forEach((p, i) => p.resolve(results[i])),
      (error) => batch.forEach((p) => p.reject(error)),
    );
  }
}
