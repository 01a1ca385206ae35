import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { RedisEndpoint } from './redis.factory';
import { RedisLink } from './redis.link';
import { RedisKeys } from './redis.keys';
import { isSlotLeftPush } from './cluster/cluster.redirects';
import type { Channels } from './pubsub.channels';

/**
 * The process's Redis connections — at most three, however many workflows it runs and however
 * many nodes a cluster has: `command` (scripts and reads), `blocking` (the worker's wait for a
 * wake marker; only in worker processes) and `subscriber` (done- and progress-channel
 * subscriptions, opened by the first wait; in worker processes also the cancel channel, opened
 * at start). Each is a {@link RedisLink}, so no call over it can hang. Connections are lazy:
 * nothing connects before the first command, so module init does no I/O. All three are Sluice's
 * own, also when the options give an ioredis instance: it is duplicated with Sluice's settings
 * (and left open). On a Redis Cluster all three go to the master owning the namespace's slot,
 * and move together when it changes (see RedisEndpoint).
 */
@Injectable()
export class RedisConnections implements OnApplicationShutdown {
  private readonly logger = new Logger('Sluice');
  readonly command: RedisLink;
  readonly blocking: RedisLink;
  readonly subscriber: RedisLink;
  /** How to subscribe to the namespace's channels: sharded on a cluster. */
  readonly channels: Channels;

  private readonly endpoint: RedisEndpoint;
  /** The check of where the slot went, once for a burst of dropped subscriptions. */
  private following?: Promise<unknown>;

  constructor(@Inject(RESOLVED_QUEUE_OPTIONS) options: ResolvedQueueOptions, keys: RedisKeys) {
    const endpoint = (this.endpoint = new RedisEndpoint(options));
    this.command = endpoint.link('command', this.logger);
    this.blocking = endpoint.link('blocking', this.logger);
    this.subscriber = endpoint.link('subscriber', this.logger);
    this.channels = endpoint.channels;
    if (!endpoint.owner) return;
    endpoint.owner.onChange((owner) => {
      this.logger.log(
        `Redis Cluster: the namespace's slot ${endpoint.owner!.slot} is now served by ${owner.host}:${owner.port}; moving the connections there`,
      );
      [this.command, this.blocking, this.subscriber].forEach((link) => link.retire());
    });
    // A process that only waits sends nothing that a MOVED would answer: when the slot leaves the
    // node, its dropped subscriptions are the only sign. Ask that node about a key of the
    // namespace: its MOVED names the new owner, which moves every connection and subscribes again.
    const key = keys.schema;
    this.subscriber.onCreate((redis) => {
      redis.on('error', (error: Error) => isSlotLeftPush(error) && this.followSlot(key));
      // A subscribe answered MOVED: ioredis emits 'moved' and never settles it. Send it again once the slot is followed.
      redis.on('moved', () => {
        this.followSlot(key);
        this.subscriber.redirectInflight(redis, 'MOVED (a subscribe reached a node that no longer serves the slot)');
      });
    });
  }

  /**
   * Opens the subscriber connection once `after` resolves (a worker's boot: once its first runs
   * are done, see BootQuiet) and the command connection reaches Redis: not before, so while Redis
   * is down at boot one connection waits for it, not two. The blocking connection opens on its
   * first read, when the worker first runs out of work (after the same wait).
   */
  openSubscriberOnceReachable(after: Promise<void>): void {
    let opened = false;
    const openSubscriber = () => {
      if (opened) return;
      opened = true;
      this.subscriber.open();
    };
    void after.then(() =>
      this.command.onCreate((redis) => {
        if (redis.status === 'connect' || redis.status === 'ready') openSubscriber();
        else redis.once('connect', openSubscriber);
      }),
    );
  }

  private followSlot(key: string): void {
    this.following ??= this.command
      .call('follow the namespace slot', (redis) => redis.exists(key), { idempotent: true })
      .catch(() => undefined)
      .finally(() => (this.following = undefined));
  }

  async onApplicationShutdown(): Promise<void> {
    this.endpoint.owner?.close();
    await Promise.all([this.command, this.blocking, this.subscriber].map((link) => link.close()));
  }
}
