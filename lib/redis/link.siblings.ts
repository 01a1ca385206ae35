/** A connection that can be told to reconnect now rather than when its reconnect pause ends. */
export interface Reconnectable {
  reconnectNow(): void;
}

/**
 * The connections of one process to one Redis (command, blocking, subscriber). Each reconnects
 * on its own after an outage, with jittered pauses of up to MAX_RECONNECT_DELAY_MS; the first one
 * ready again tells the others, which reconnect at once: otherwise a call on a connection still
 * in its pause (a `run()`'s subscribe, right after the worker came back) fails within
 * `redisTimeoutMs` although Redis answers.
 */
export class LinkSiblings {
  private readonly members = new Set<Reconnectable>();

  join(member: Reconnectable): void {
    this.members.add(member);
  }

  /** `from` is ready again: the others stop waiting out their pause. */
  back(from: Reconnectable): void {
    for (const member of this.members) if (member !== from) member.reconnectNow();
  }
}
