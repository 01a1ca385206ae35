import type { Cluster, Redis } from 'ioredis';
import { isCluster, nodeFor } from './nodes';

/**
 * A test's side of Sluice's channels (`done:<id>`, `progress:<id>`, `cancel`), the way Sluice uses
 * them (lib/redis/pubsub.channels.ts, `publish` in lua/includes/util.lua): classic pub/sub on a
 * single server; sharded pub/sub on a Redis Cluster, where a channel lives on the shard serving
 * its slot and a classic PUBLISH would reach no sharded subscriber.
 */

/** How many connections are subscribed to `channel`: PUBSUB NUMSUB, or SHARDNUMSUB on the channel's shard. */
export async function channelSubscribers(redis: Redis | Cluster, channel: string): Promise<number> {
  if (!isCluster(redis)) return Number(((await redis.pubsub('NUMSUB', channel)) as [string, number])[1]);
  const node = await nodeFor(redis, channel);
  return Number(((await node.call('PUBSUB', 'SHARDNUMSUB', channel)) as [string, number])[1]);
}

/** Publishes `message` on `channel` as Sluice's scripts would (PUBLISH, or SPUBLISH on the channel's shard); resolves to the receivers. */
export async function publishOn(redis: Redis | Cluster, channel: string, message: string): Promise<number> {
  if (!isCluster(redis)) return redis.publish(channel, message);
  const node = await nodeFor(redis, channel);
  return Number(await node.call('SPUBLISH', channel, message));
}

/** What {@link listenToChannels} heard. */
export interface ChannelListener {
  /** The channel of each message heard so far, in arrival order. */
  readonly heard: string[];
  /** The messages themselves, in the same order. */
  readonly messages: string[];
  /** Waits until every message published before the call has arrived (a PING behind them), then stops listening. */
  close(): Promise<void>;
}

/**
 * Listens to Sluice's channels matching `pattern` (a glob with `*`), to see which were published.
 * On a single server: PSUBSCRIBE `pattern`. On a cluster the channels are sharded and sharded
 * pub/sub has no patterns: SSUBSCRIBE `channels` on their shard instead — so `channels` must list
 * every channel of the pattern the test could see published (all of one namespace, one slot).
 */
export async function listenToChannels(redis: Redis | Cluster, pattern: string, channels: string[]): Promise<ChannelListener> {
  const glob = new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`);
  const stray = channels.filter((channel) => !glob.test(channel));
  if (stray.length) throw new Error(`listenToChannels: ${stray.join(', ')} do not match ${pattern}`);
  const heard: string[] = [];
  const messages: string[] = [];
  let subscriber: Redis;
  if (!isCluster(redis)) {
    subscriber = redis.duplicate();
    subscriber.on('pmessage', (_pattern: string, channel: string, message: string) => (heard.push(channel), messages.push(message)));
    await subscriber.psubscribe(pattern);
  } else {
    if (channels.length === 0) throw new Error('listenToChannels on a cluster: list the channels (sharded pub/sub has no patterns)');
    const nodes = new Set(await Promise.all(channels.map((channel) => nodeFor(redis, channel))));
    if (nodes.size !== 1) throw new Error(`listenToChannels: ${channels.join(', ')} are on different shards`);
    subscriber = [...nodes][0].duplicate();
    subscriber.on('smessage', (channel: string, message: string) => (heard.push(channel), messages.push(message)));
    await subscriber.ssubscribe(...channels);
  }
  return {
    heard,
    messages,
    async close() {
      await subscriber.ping(); // replies come in order: every message published before now has arrived
      await subscriber.quit();
    },
  };
}
