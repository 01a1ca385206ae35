import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import { LuaScripts } from '../../lib/redis/lua.scripts';
import { RedisLink } from '../../lib/redis/redis.link';

/** The Lua scripts over a test's own connection (bounded like Sluice's), defined on it at once. */
export function scriptsOn(redis: Redis): LuaScripts {
  const link = new RedisLink('command', () => redis, 10_000, new Logger('test'));
  const scripts = new LuaScripts(link);
  void link.client; // creates the link's instance (the given one), which defines the scripts on it
  return scripts;
}
