import type { Redis } from 'ioredis';
import type { Channels } from '../redis/pubsub.channels';
import type { RedisLink } from '../redis/redis.link';

/** How often a worker checks that its subscriber connection exists (see {@link WorkerChannels.start}). */
const RECHECK_MS = 5_000;

/**
 * The channels a worker process listens on (its runs' cancellations, its fast-path handoffs),
 * subscribed once, on the subscriber connection it shares with the waiters, and again on every
 * replacement connection. Pub/sub is a doorbell: a message sent while the subscriber reconnects
 * is lost, so each channel's sender has a backstop (see the handlers).
 */
export class WorkerChannels {
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
    /** Channel → what to do with a message on it. */
    private readonly routes: ReadonlyMap<string, (message: string) => void>,
    /**
     * Called each time the channels are subscribed (at first, and again on a new connection):
     * what was published before that is lost, and the caller catches up with it.
     */
    private readonly subscribed: () => void = () => undefined,
  ) {}

  /**
   * Subscribes (and again on every replacement connection); a failure leaves each channel's
   * backstop. Over the subscriber connection as it is opened (see
   * RedisConnections.openSubscriberOnceReachable): not before the command connection reaches
   * Redis, so while Redis is away at boot one connection waits for it, not two.
   */
  start(): void {
    this.listening = true;
    let opened = false;
    this.subscriber.onCreate((redis) => {
      opened = true;
      redis.on(this.channels.messageEvent, (channel: string, message: string) => {
        if (this.listening) this.routes.get(channel)?.(message);
      });
      // Every (re)connection starts with no subscriptions (ioredis's own resubscribe is off).
      redis.on('close', () => this.subscribedOn === redis && (this.subscribedOn = undefined));
      redis.on('ready', () => this.listening && this.subscribe());
    });
    if (opened) this.subscribe();
    // A replaced subscriber connection (one that stopped answering) is reopened only by the next
    // call over it, and a worker-only process may make none: look now and then, for free while
    // the connection is there.
    this.timer = setInterval(() => opened && !this.subscriber.hasConnection && this.subscribe(), RECHECK_MS);
    this.timer.unref();
  }

  stop(): void {
    this.listening = false;
    clearInterval(this.timer);
  }

  private subscribe(): void {
    let sentOn: Redis | undefined;
    this.subscriber
      .call('subscribe to worker channels', (redis) => {
        if (this.subscribedOn === redis) return Promise.resolve(undefined);
        this.subscribedOn = sentOn = redis;
        return this.channels.subscribe(redis, [...this.routes.keys()]).then(() => this.listening && this.subscribed());
      })
      .catch(() => {
        if (sentOn && this.subscribedOn === sentOn) this.subscribedOn = undefined;
      });
  }
}
