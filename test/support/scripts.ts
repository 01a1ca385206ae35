import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import { LuaScripts } from '../../lib/redis/lua.scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { RedisLink } from '../../lib/redis/redis.link';

/**
 * The Lua scripts over a test's own connection (bounded like Sluice's), defined on it at once.
 * `namespace` places the slot-guard keys (only a cluster cares that they share the script's slot).
 */
export function scriptsOn(redis: Redis, namespace = 'default'): LuaScripts {
  const link = new RedisLink('command', () => redis, 10_000, new Logger('test'));
  const scripts = new LuaScripts(link, new RedisKeys('sluice', namespace));
  void link.client; // creates the link's instance (the given one), which defines the scripts on it
  return scripts;
}
