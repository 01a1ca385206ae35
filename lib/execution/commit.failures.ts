import { RedisConnectionError } from '../errors';

/**
 * The errors of one attempt's own commits (its step saves and durable waits) that mean Redis did
 * not answer: only those hand the run back without counting a failure (see lib/worker/hand-back.ts).
 * Marked by identity, never by class: a `RedisConnectionError` the workflow's own code throws (it
 * called another Sluice client whose Redis is down) is an ordinary failure — attempts, backoff,
 * a `failed` event — or a run that keeps hitting it would be handed back, uncounted, for ever.
 */
export class OwnCommitFailures {
  /** Made at the first such failure: most attempts never see one. */
  private errors?: WeakSet<object>;

  /** `commit`, with the connection error it may reject with remembered as this attempt's own. */
  watch<T>(commit: Promise<T>): Promise<T> {
    return commit.then(undefined, (error: unknown) => {
      this.note(error);
      throw error;
    });
  }

  /** An error this attempt's own commit failed with: remembered if it is a connection error (see {@link watch}). */
  note(error: unknown): void {
    if (error instanceof RedisConnectionError) (this.errors ??= new WeakSet()).add(error);
  }

  /** Whether `error` is one this attempt's own commit rejected with (as thrown, not wrapped). */
  has(error: unknown): boolean {
    return typeof error === 'object' && error !== null && this.errors !== undefined && this.errors.has(error);
  }
}
