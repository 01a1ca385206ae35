import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChainableCommander, Redis } from 'ioredis';
import type { CallOptions, RedisLink } from './redis.link';
import type { RedisKeys } from './redis.keys';
import { clusterRedirect } from './cluster/cluster.redirects';

/** Where the scripts live, both from `lib/redis` (ts-node, tests) and `dist/redis` (published). */
export const LUA_DIR = join(__dirname, '..', '..', 'lua');

export type ScriptName = 'activate-groups' | 'migrate-group-due' | 'migrate-lock' | 'enqueue' | 'enqueue-many' | 'reserve' | 'complete' | 'fail' | 'save-steps' | 'extend-leases' | 'release' | 'declare-limits' | 'park' | 'set-limits' | 'stats' | 'watch' | 'cancel' | 'set-control' | 'progress' | 'schedule-write' | 'schedule-control' | 'schedule-plan' | 'schedule-list' | 'migrate-schedule-index' | 'list-runs' | 'retry' | 'remove' | 'suspend' | 'signal' | 'send-event';

export interface LuaScript {
  name: ScriptName;
  /** The command name registered with ioredis: `sluice_` + the file name. */
  command: string;
  /** Every key it declares, the two slot-guard keys (the last two) included. */
  numberOfKeys: number;
  source: string;
}

/**
 * The slot guard: every script declares, after its own keys, two keys of the namespace that never
 * exist. Redis Cluster checks declared keys before it runs a script, and while the namespace's
 * slot migrates it refuses one that names a missing key (`TRYAGAIN`, or `ASK` to a target that
 * refuses it in turn). So no script runs during a migration, and none can stop halfway: a script
 * that reaches a key already moved fails at that command, after its earlier writes, and a
 * declared key a script deletes and writes again counts as moved too. Sluice sends the call
 * again once the slot has settled (RedisLink). Outside a migration, and on a single server,
 * the guard costs nothing.
 */
export const SLOT_GUARD_KEYS = 2;

/**
 * Reads `lua/<name>.lua`, inlines `-- @include <file>` lines from `lua/includes/`, and takes the
 * key count from the header's highest `KEYS[n]`, so the header is the single source of truth.
 * Every script starts with `#!lua` and the Redis 7 flags it needs: `no-writes` for the readers,
 * `allow-oom` for the scripts that free memory (they must work when memory is full); the others
 * are refused whole, before they run, while Redis is out of memory.
 */
export function loadScript(name: string, dir = LUA_DIR): LuaScript {
  const raw = readFileSync(join(dir, `${name}.lua`), 'utf8');
  const source = raw.replace(/^-- @include (\S+)\s*$/gm, (_, include: string) => readFileSync(join(dir, 'includes', `${include}.lua`), 'utf8'));
  const header = /^#!lua[^\n]*\n--\[\[([\s\S]*?)\]\]/.exec(raw)?.[1];
  if (!header || !/Reply:/.test(header)) throw new Error(`lua/${name}.lua must start with #!lua and a --[[ … ]] header listing KEYS, ARGV and the Reply`);
  const keyNumbers = [...header.matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1]));
  const numberOfKeys = Math.max(0, ...keyNumbers);
  if (!new RegExp(`KEYS\\[${numberOfKeys - 1}\\], KEYS\\[${numberOfKeys}\\] the slot guard`).test(header)) {
    throw new Error(`lua/${name}.lua: its header's last two KEYS must be the slot guard (see SLOT_GUARD_KEYS)`);
  }
  return { name: name as ScriptName, command: `sluice_${name.replace(/-/g, '_')}`, numberOfKeys, source };
}

/** Every script file in `lua/` (not the includes). */
export function scriptNames(dir = LUA_DIR): string[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.lua'))
    .map((file) => file.slice(0, -'.lua'.length))
    .sort();
}

type Arg = string | number;

/**
 * Runs the scripts over the command link via ioredis `defineCommand` (on every connection the
 * link opens): EVALSHA, falling back to EVAL (which loads the script) on NOSCRIPT, e.g. after a
 * Redis restart or failover. Every call is bounded by the link (see {@link RedisLink}).
 */
export class LuaScripts {
  private readonly scripts = new Map<ScriptName, LuaScript>();
  private readonly guard: string[];

  /** @param sharded on a Redis Cluster: the scripts publish on sharded channels (see RedisKeys.slotGuard). */
  constructor(
    private readonly link: RedisLink,
    keys: RedisKeys,
    sharded = false,
  ) {
    this.guard = keys.slotGuard(sharded);
    for (const name of scriptNames()) {
      const script = loadScript(name);
      this.scripts.set(script.name, script);
    }
    link.onCreate((redis) => this.scripts.forEach((script) => redis.defineCommand(script.command, { numberOfKeys: script.numberOfKeys, lua: script.source })));
  }

  /**
   * Runs one script; `options.idempotent` only for scripts whose repetition is harmless. `args`
   * may depend on whether the call repeats a try whose reply was lost.
   */
  run<T = unknown>(name: ScriptName, keys: string[], args: Arg[] | ((retry: boolean) => Arg[]), options?: CallOptions): Promise<T> {
    const script = this.get(name, keys);
    return this.link.call(
      name,
      (redis, retry) => (redis as unknown as Record<string, (...a: Arg[]) => Promise<T>>)[script.command](...keys, ...this.guard, ...(typeof args === 'function' ? args(retry) : args)),
      options,
    );
  }

  /**
   * Runs `build`'s pipeline of scripts as one bounded call (see {@link queue}). On a cluster, a
   * pipeline a node redirected in part (its slot started migrating halfway) is sent again whole,
   * so it must hold only calls whose repetition is harmless (enqueueMany: run ids).
   */
  pipeline(operation: string, build: (pipeline: ChainableCommander) => void, options: CallOptions & { idempotent: true }): Promise<[Error | null, unknown][]> {
    return this.link.call(
      operation,
      async (redis: Redis) => {
        const pipeline = redis.pipeline();
        build(pipeline);
        const replies = ((await pipeline.exec()) ?? []) as [Error | null, unknown][];
        const redirect = replies.map(([error]) => error && clusterRedirect(error, redis)).find(Boolean);
        if (redirect) throw redirect;
        return replies;
      },
      options,
    );
  }

  /** Queues the script on a pipeline (one round trip for many calls, e.g. `enqueueMany`). */
  queue(pipeline: ChainableCommander, name: ScriptName, keys: string[], args: Arg[]): void {
    const script = this.get(name, keys);
    (pipeline as unknown as Record<string, (...a: Arg[]) => unknown>)[script.command](...keys, ...this.guard, ...args);
  }

  private get(name: ScriptName, keys: string[]): LuaScript {
    const script = this.scripts.get(name);
    if (!script) throw new Error(`unknown Lua script ${name}`);
    if (keys.length + SLOT_GUARD_KEYS !== script.numberOfKeys) throw new Error(`script ${name} takes ${script.numberOfKeys - SLOT_GUARD_KEYS} keys (and the slot guard), got ${keys.length}`);
    return script;
  }
}
