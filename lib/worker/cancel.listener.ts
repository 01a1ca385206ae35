import type { Redis } from 'ioredis';
import { RunCancelledError } from '../errors';
import type { Channels } from '../redis/pubsub.channels';
import type { RedisLink } from '../redis/redis.link';
import type { ActiveRuns } from './active-runs';

/** How often a worker checks that its subscriber connection exists (see {@link CancelListener.start}). */
const RECHECK_MS = 5_000;

/**
 * Aborts the signal of a run this process executes as soon as it is cancelled. lua/cancel.lua
 * publishes `<id> <token> <reason>` on the namespace's cancel channel; each worker process
 * subscribes to it once, on the subscriber connection it shares with the waiters. A cancel
 * therefore costs one publish however many runs are in flight, and no worker polls Redis per run.
 * Pub/sub is only a doorbell, though: a message sent while the subscriber reconnects is lost, and
 * the lease heartbeat (every third of `worker.lockMs`) is the backstop, since a cancelled run's
 * lease no longer extends.
 */
export class CancelListener {
  private listening = false;
  private timer?: NodeJS.Timeout;
  /**
   * The connection subscribed (or being subscribed) since it last connected: the first connect's
   * 'ready' and start()'s own call would otherwise subscribe twice.
   */
  private subscribedOn?: Redis;

  constructor(
    private readonly subscriber: RedisLink,
    private readonly channels: Channels,
    private readonly channel: string,
    private readonly active: ActiveRuns,
  ) {}

  /** Subscribes (and again on every replacement connection); a failure leaves the heartbeat as backstop. */
  start(): void {
    this.listening = true;
    this.subscriber.onCreate((redis) => {
      redis.on(this.channels.messageEvent, (channel: string, message: string) => {
        if (this.listening && channel === this.channel) this.onCancel(message);
      });
      // Every (re)connection starts with no subscriptions (ioredis's own resubscribe is off).
      redis.on('close', () => this.subscribedOn === redis && (this.subscribedOn = undefined));
      redis.on('ready', () => this.listening && this.subscribe());
    });
    this.subscribe();
    // A replaced subscriber connection (one that stopped answering) is reopened only by the next
    // call over it, and a worker-only process may make none: look now and then, for free while
    // the connection is there.
    this.timer = setInterval(() => !this.subscriber.hasConnection && this.subscribe(), RECHECK_MS);
    this.timer.unref();
  }

  stop(): void {
    this.listening = false;
    clearInterval(this.timer);
  }

  private subscribe(): void {
    let sentOn: Redis | undefined;
    this.subscriber
      .call('subscribe to cancellations', (redis) => {
        if (this.subscribedOn === redis) return Promise.resolve(undefined);
        this.subscribedOn = sentOn = redis;
        return this.channels.subscribe(redis, [this.channel]);
      })
      .catch(() => {
        if (sentOn && this.subscribedOn === sentOn) this.subscribedOn = undefined;
      });
  }

  private onCancel(message: string): void {
    const [id, token] = message.split(' ', 2);
    const run = this.active.get(id);
    // Only the attempt cancelled: an older attempt of the same id in this process has lost its lease anyway.
    if (run?.token !== token) return;
    const reason = message.slice(id.length + token.length + 2);
    run.abort.abort(new RunCancelledError(id, reason || undefined));
  }
}
