import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { LocalWaits } from '../interfaces/local.waits';
import type { RedisKeys } from '../redis/redis.keys';

type Listener = (message: string) => void;

/** What a wait takes for "read the record again" (PendingWait.onMessage: not an announcement). */
const REREAD = 'reread';

/**
 * This process's inbox: one channel, subscribed once and kept, on which workers announce the runs
 * its `run()` calls enqueued (`<run id> <done message>`, see finishRun in lua/includes/finish.lua),
 * so a `run()` costs its enqueue and nothing else — no subscribe, read or unsubscribe per call.
 * It hands each message to the waits on that run, and tells whether it is live: subscribed over
 * a connection that has not closed since, so that an announcement published now reaches it.
 */
export class RunInbox implements LocalWaits {
  /** The id a run's 'waited' field names (base64url: no space, never '1'). */
  readonly id = randomBytes(9).toString('base64url');
  private readonly waits = new Map<string, Set<Listener>>();
  /** The connection the subscription is live on; undefined before, and once it closed. */
  private liveOn?: Redis;
  /** Counts the closes of the live connection: a wait that saw it change may have lost its message. */
  private closes = 0;

  readonly channel: string;

  constructor(keys: RedisKeys) {
    this.channel = keys.inbox(this.id);
  }

  /** Whether an announcement published now would reach this process. */
  get live(): boolean {
    return this.liveOn?.status === 'ready';
  }

  /** Changes each time the live subscription is lost (see {@link live}). */
  get epoch(): number {
    return this.closes;
  }

  /** The subscription was made over `redis` (at first, or again after a reconnect). */
  subscribedOn(redis: Redis): void {
    if (redis.status === 'ready') this.liveOn = redis;
  }

  /** A subscriber connection closed: if it carried the subscription, messages may have been lost. */
  closed(redis: Redis): void {
    if (this.liveOn !== redis) return;
    this.liveOn = undefined;
    this.closes++;
  }

  add(runId: string, listener: Listener): void {
    const set = this.waits.get(runId);
    if (set) set.add(listener);
    else this.waits.set(runId, new Set([listener]));
  }

  remove(runId: string, listener: Listener): void {
    const set = this.waits.get(runId);
    if (set?.delete(listener) && set.size === 0) this.waits.delete(runId);
  }

  /**
   * This process's worker committed the run (see LocalWaits): its waits get the announcement
   * Redis would have published, in the same form (finishRun in lua/includes/finish.lua).
   */
  completed(runId: string, workflow: string, encoded: string): void {
    const set = this.waits.get(runId);
    if (!set) return;
    const undef = encoded === '';
    const message = `{"v":1,"state":"completed","workflow":${JSON.stringify(workflow)},"result":${undef ? 'null' : encoded},"undef":${undef}}`;
    set.forEach((listener) => listener(message));
  }

  /** See LocalWaits: a message that is no announcement has a wait read its record again. */
  unsure(runIds: readonly string[]): void {
    for (const runId of runIds) this.waits.get(runId)?.forEach((listener) => listener(REREAD));
  }

  /**
   * A message on the inbox channel, handed to the waits on its run; one without a run id (the
   * reconnect notice: see RunWaiter) to every wait, so each reads its run again.
   */
  readonly onMessage = (message: string): void => {
    const space = message.indexOf(' ');
    if (space < 0) return this.waits.forEach((set) => set.forEach((listener) => listener(message)));
    this.waits.get(message.slice(0, space))?.forEach((listener) => listener(message.slice(space + 1)));
  };
}
