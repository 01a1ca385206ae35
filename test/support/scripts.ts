import { Logger } from '@nestjs/common';
import type { ChainableCommander } from 'ioredis';
import type Redis from 'ioredis';
import { LuaScripts, type ScriptName } from '../../lib/redis/lua.scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { RedisLink, type CallOptions } from '../../lib/redis/redis.link';
import { isCluster } from './nodes';

type Arg = string | number;

/** What {@link scriptsOn} made, per connection and arguments. */
const madeOn = new WeakMap<Redis, Map<string, LuaScripts>>();

/**
 * The Lua scripts over a test's own connection (bounded like Sluice's), defined on it at once.
 * `namespace` places the slot-guard keys (only a cluster cares that they share the script's slot);
 * without it, each call's guard is of the namespace its first key belongs to, so one instance
 * serves every namespace a test uses — on a cluster too, where a guard of another namespace
 * would make the call CROSSSLOT. (A single server is sent no guard.) `cluster`: whether the
 * calls go to a Redis Cluster, and so carry the guard — true for a connection to one of its nodes.
 */
export function scriptsOn(redis: Redis, namespace?: string, cluster = isCluster(redis)): LuaScripts {
  // One per connection and arguments: each link adds its listeners to the connection, and a test
  // that asks again per call would pile them up (Node's MaxListenersExceededWarning).
  const made = madeOn.get(redis) ?? madeOn.set(redis, new Map()).get(redis)!;
  const key = `${namespace ?? ''} ${cluster}`;
  let scripts = made.get(key);
  if (scripts) return scripts;
  const link = new RedisLink('command', () => redis, 10_000, new Logger('test'));
  scripts =
    namespace === undefined ? new GuardPerCallScripts(link, cluster) : new LuaScripts(link, new RedisKeys('sluice', namespace), cluster);
  void link.client; // creates the link's instance (the given one), which defines the scripts on it
  made.set(key, scripts);
  return scripts;
}

/** LuaScripts whose slot guard is taken, per call, from the hash tag `{<prefix>:<namespace>}` of the call's first key. */
class GuardPerCallScripts extends LuaScripts {
  private readonly byTag = new Map<string, LuaScripts>();

  constructor(
    private readonly scriptLink: RedisLink,
    private readonly sharded: boolean,
  ) {
    super(scriptLink, new RedisKeys('sluice', 'default'), sharded);
  }

  override run<T = unknown>(
    name: ScriptName,
    keys: string[],
    args: Arg[] | ((retry: boolean) => Arg[]),
    options?: CallOptions,
  ): Promise<T> {
    const scripts = this.forKeys(keys);
    return scripts ? scripts.run<T>(name, keys, args, options) : super.run<T>(name, keys, args, options);
  }

  override queue(pipeline: ChainableCommander, name: ScriptName, keys: string[], args: Arg[]): void {
    const scripts = this.forKeys(keys);
    if (scripts) scripts.queue(pipeline, name, keys, args);
    else super.queue(pipeline, name, keys, args);
  }

  /** The scripts guarded in the first key's namespace; undefined (the default guard) for a key with no `{prefix:namespace}` tag. */
  private forKeys(keys: string[]): LuaScripts | undefined {
    const tag = /^\{([^}]+)\}/.exec(keys[0] ?? '')?.[1];
    const separator = tag?.indexOf(':') ?? -1;
    if (!tag || separator < 0) return undefined;
    let scripts = this.byTag.get(tag);
    if (!scripts)
      this.byTag.set(
        tag,
        (scripts = new LuaScripts(this.scriptLink, new RedisKeys(tag.slice(0, separator), tag.slice(separator + 1)), this.sharded)),
      );
    return scripts;
  }
}
