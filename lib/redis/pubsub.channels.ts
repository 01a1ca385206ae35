import type { Redis } from 'ioredis';

/**
 * How a subscriber listens to the namespace's channels (`done:<id>`, `progress:<id>`, `cancel`).
 * On a Redis Cluster they are sharded channels (`SSUBSCRIBE`, Redis 7): each lives in the
 * namespace's slot, so only its shard carries the messages, where classic pub/sub would copy
 * every message to every node over the cluster bus. The scripts publish the matching way
 * (`publish` in lua/includes/util.lua).
 */
export interface Channels {
  subscribe(redis: Redis, channels: string[]): Promise<unknown>;
  unsubscribe(redis: Redis, channels: string[]): Promise<unknown>;
  /** The ioredis event a message arrives as: `(channel, message)`. */
  readonly messageEvent: 'message' | 'smessage';
  /** Sharded: the scripts publish with SPUBLISH (see RedisKeys.slotGuard). */
  readonly sharded: boolean;
}

export const CLASSIC_CHANNELS: Channels = {
  subscribe: (redis, channels) => redis.subscribe(...channels),
  unsubscribe: (redis, channels) => redis.unsubscribe(...channels),
  messageEvent: 'message',
  sharded: false,
};

export const SHARDED_CHANNELS: Channels = {
  subscribe: (redis, channels) => redis.ssubscribe(...channels),
  unsubscribe: (redis, channels) => redis.sunsubscribe(...channels),
  messageEvent: 'smessage',
  sharded: true,
};
