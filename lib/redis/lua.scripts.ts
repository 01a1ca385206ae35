import { Logger } from '@nestjs/common';
import type { ChainableCommander, Cluster, Redis } from 'ioredis';
import type { CallOptions, RedisLink } from './redis.link';
import type { RedisKeys } from './redis.keys';
import { clusterRedirect } from './cluster/cluster.redirects';
import { quotedReply } from './command.refusal';
import { sendFcall } from './fcall.command';
import { LayoutRefusedError, type LayoutGate } from './layout.gate';
import { AT_LAYOUT_SCRIPTS, AT_LAYOUT_SUFFIX, LAYOUT_REFUSAL, luaLibrary, type LuaLibrary } from './lua.library';
import { allScripts, type LuaScript, type ScriptName } from './lua.source';

export { LUA_DIR, loadScript, scriptNames, type LuaScript, type ScriptName } from './lua.source';

/**
 * The slot guard: every script declares, after its own keys, two keys of the namespace that never
 * exist. Redis Cluster checks declared keys before it runs a script, and while the namespace's
 * slot migrates it refuses one that names a missing key (`TRYAGAIN`, or `ASK` to a target that
 * refuses it in turn). So no script runs during a migration, and none can stop halfway: a script
 * that reaches a key already moved fails at that command, after its earlier writes, and a
 * declared key a script deletes and writes again counts as moved too. Sluice sends the call
 * again once the slot has settled (RedisLink). Outside a migration the guard costs a cluster
 * nothing. A single server has no slots to migrate, so there it is not sent: two keys fewer per
 * call to build, send and parse.
 */
export const SLOT_GUARD_KEYS = 2;

type Arg = string | number;

/** What runs scripts: the scripts themselves, or a view of them that runs each only at a layout (see LuaScripts.atLayout). */
export type ScriptRunner = Pick<LuaScripts, 'run'>;
type Caller = Record<string, (...args: Arg[]) => Promise<unknown>>;

/** FCALL of a function the server does not hold (never loaded, `FUNCTION FLUSH`, a restart without persistence). */
const FUNCTION_MISSING = /^ERR Function not found/;
/**
 * Replies refusing FUNCTION LOAD or FCALL itself (an ACL, a proxy without them): the scripts go
 * through EVALSHA instead. Only these: a NOPERM raised by a command inside a function that ran
 * (a channel the user may not publish to…) means it ran up to there, and must not run again.
 */
const FUNCTIONS_REFUSED = /^(NOPERM .*'(fcall|function\|load)' command|ERR unknown (sub)?command '?(fcall|function|load)')/i;

/**
 * Runs the scripts over the command link, every call bounded by the link (see {@link RedisLink}).
 *
 * They are called as the functions of one library ({@link LuaLibrary}) with `FCALL`. A call the
 * server answers "Function not found" (its first on a new server, or after a restart without
 * persistence) loads the library (`FUNCTION LOAD`, on every master of a cluster; another
 * process's concurrent load is as good) and is sent again: it never ran. Where the library cannot
 * be loaded — an ACL user without `FUNCTION LOAD` or `FCALL`, a proxy without them — the scripts
 * run through ioredis `defineCommand` (EVALSHA, falling back to EVAL on NOSCRIPT), from
 * then on (logged once), or for that call only if the load was refused for a passing reason (out
 * of memory, where the scripts flagged `allow-oom` must still run).
 */
export class LuaScripts {
  private readonly scripts = new Map<ScriptName, LuaScript>();
  /** The slot guard's keys: on a cluster only (see {@link SLOT_GUARD_KEYS}). */
  private readonly guard: string[];
  private readonly library: LuaLibrary;
  private functions = true;
  private readonly loading = new WeakMap<object, Promise<boolean>>();
  /** Connections the scripts are defined on as ioredis commands (the EVALSHA path), once it is taken. */
  private readonly defined = new WeakSet<Redis>();

  /** @param sharded on a Redis Cluster: the calls carry the slot guard, and the scripts publish on sharded channels (see RedisKeys.slotGuard). */
  constructor(
    private readonly link: RedisLink,
    keys: RedisKeys,
    sharded = false,
  ) {
    this.guard = sharded ? keys.slotGuard(true) : [];
    for (const script of allScripts()) this.scripts.set(script.name, script);
    this.library = luaLibrary();
  }

  /**
   * Runs one script; `options.idempotent` only for scripts whose repetition is harmless. `args`
   * may depend on whether the call repeats a try whose reply was lost.
   */
  run<T = unknown>(name: ScriptName, keys: string[], args: Arg[] | ((retry: boolean) => Arg[]), options?: CallOptions): Promise<T> {
    return this.call(name, keys, args, options);
  }

  /**
   * These scripts, run only while the namespace is at a layout `gate` allows: each call checks
   * the layout marker first and, at another layout, rejects with {@link LayoutRefusedError}
   * having done nothing (as it does where the scripts go through EVALSHA). For a worker's boot:
   * its declarations and first reserve go out with the connection's first check, before the
   * layout was read (only the scripts of AT_LAYOUT_SCRIPTS have this variant).
   */
  atLayout(gate: LayoutGate): ScriptRunner {
    return { run: (name, keys, args, options) => this.call(name, keys, args, options, gate) };
  }

  private call<T>(
    name: ScriptName,
    keys: string[],
    args: Arg[] | ((retry: boolean) => Arg[]),
    options?: CallOptions,
    gate?: LayoutGate,
  ): Promise<T> {
    const script = this.get(name, keys);
    if (gate && !AT_LAYOUT_SCRIPTS.has(name)) throw new Error(`script ${name} has no at-layout variant`);
    return this.link.call(
      name,
      async (redis, retry) => {
        const own = typeof args === 'function' ? args(retry) : args;
        const argv = gate ? [...keys, ...this.guard, gate.marker, ...own, gate.lowest, gate.highest] : [...keys, ...this.guard, ...own];
        if (this.functions) {
          try {
            return (await this.fcall(redis, script, argv, gate)) as T;
          } catch (error) {
            const message = (error as Error).message;
            if (FUNCTIONS_REFUSED.test(message)) this.fallBack(error as Error);
            else if (!FUNCTION_MISSING.test(message)) throw error;
            else if ((await this.load(redis)) && this.functions) return (await this.fcall(redis, script, argv, gate)) as T;
          }
        }
        if (gate) throw new LayoutRefusedError(name);
        return (await (this.commands(redis) as unknown as Caller)[script.command](...argv)) as T;
      },
      options,
    );
  }

  /**
   * Runs `build`'s pipeline of scripts as one bounded call (see {@link queue}). On a cluster, a
   * pipeline a node redirected in part (its slot started migrating halfway) is sent again whole,
   * so it must hold only calls whose repetition is harmless (enqueueMany: run ids); so is one whose
   * functions were missing, once the library is loaded.
   */
  pipeline(
    operation: string,
    build: (pipeline: ChainableCommander) => void,
    options: CallOptions & { idempotent: true },
  ): Promise<[Error | null, unknown][]> {
    return this.link.call(
      operation,
      async (redis: Redis) => {
        const viaFunctions = this.functions;
        let replies = await this.exec(redis, build);
        if (viaFunctions && (await this.sendAgain(redis, replies))) replies = await this.exec(redis, build);
        const redirect = replies.map(([error]) => error && clusterRedirect(error, redis)).find(Boolean);
        if (redirect) throw redirect;
        return replies;
      },
      options,
    );
  }

  /**
   * Whether a pipeline sent with FCALL goes again: its functions were missing and are loaded now,
   * or FCALL or the library's load was refused, so it goes through EVALSHA from now on (as a
   * single call does). Its calls are all repeatable (see {@link pipeline}): sending it again whole
   * is safe even if some of them ran. Only a load refused for a passing reason (out of memory)
   * leaves the replies as they are.
   */
  private async sendAgain(redis: Redis, replies: [Error | null, unknown][]): Promise<boolean> {
    const refused = replies.find(([error]) => error && FUNCTIONS_REFUSED.test(error.message))?.[0];
    if (refused) {
      this.fallBack(refused);
      return true;
    }
    if (!replies.some(([error]) => error && FUNCTION_MISSING.test(error.message))) return false;
    return (await this.load(redis)) || !this.functions;
  }

  /** Queues the script on a pipeline (one round trip for many calls, e.g. `enqueueMany`). */
  queue(pipeline: ChainableCommander, name: ScriptName, keys: string[], args: Arg[]): void {
    const script = this.get(name, keys);
    const argv = [...keys, ...this.guard, ...args];
    if (this.functions) {
      const queued = pipeline as ChainableCommander & Pick<Redis, 'options' | 'sendCommand'>;
      // Queued: the pipeline's exec gives the reply (and handles its command's rejection).
      void sendFcall(queued, this.library.functionName(name), this.keyCount(script), argv);
    } else void (pipeline as unknown as Caller)[script.command](...argv);
  }

  private async exec(redis: Redis, build: (pipeline: ChainableCommander) => void): Promise<[Error | null, unknown][]> {
    // A pipeline has the commands its connection had when it was made (the EVALSHA path's too).
    const pipeline = (this.functions ? redis : this.commands(redis)).pipeline();
    build(pipeline);
    return (await pipeline.exec()) ?? [];
  }

  /**
   * `redis` with every script defined as an ioredis command (EVALSHA, falling back to EVAL on
   * NOSCRIPT), defined on first use: only where functions are refused. Defining them hashes every
   * script's whole source (about a millisecond for all), which a connection on the library never
   * needs, so a new connection, the first of a worker's boot included, does not pay for it.
   */
  private commands(redis: Redis): Redis {
    if (!this.defined.has(redis)) {
      this.scripts.forEach((script) => redis.defineCommand(script.command, { numberOfKeys: this.keyCount(script), lua: script.source }));
      this.defined.add(redis);
    }
    return redis;
  }

  private fcall(redis: Redis, script: LuaScript, argv: Arg[], gate?: LayoutGate): Promise<unknown> {
    const fn = this.library.functionName(script.name);
    if (!gate) return sendFcall(redis, fn, this.keyCount(script), argv);
    return sendFcall(redis, fn + AT_LAYOUT_SUFFIX, this.keyCount(script) + 1, argv).catch((error: Error) => {
      if (!error.message.startsWith(`${LAYOUT_REFUSAL} `)) throw error;
      throw new LayoutRefusedError(script.name, error.message.slice(LAYOUT_REFUSAL.length + 1));
    });
  }

  /**
   * Loads the library where `redis` sends its calls (every master of a cluster); concurrent calls
   * share one load. Resolves true if it is there now, false if the call should go through EVALSHA.
   */
  private load(redis: Redis | Cluster): Promise<boolean> {
    let pending = this.loading.get(redis);
    if (!pending) {
      const nodes = 'isCluster' in redis && redis.isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
      pending = Promise.all(nodes.map((node) => this.loadOn(node)))
        .then(() => true)
        .catch((error: Error) => {
          if (FUNCTIONS_REFUSED.test(error.message)) this.fallBack(error);
          else if (!/^OOM /.test(error.message)) throw error;
          return false;
        })
        .finally(() => this.loading.delete(redis));
      this.loading.set(redis, pending);
    }
    return pending;
  }

  private async loadOn(node: Redis): Promise<void> {
    try {
      await node.call('FUNCTION', 'LOAD', this.library.code);
    } catch (error) {
      if (!/already exists/.test((error as Error).message)) throw error;
    }
  }

  /**
   * From now on the scripts go through EVALSHA: said once per process, naming the command Redis
   * refused (an unknown command's reply is cut before the arguments it echoes: the library's code).
   */
  private fallBack(error: Error): void {
    if (!this.functions) return;
    this.functions = false;
    const refused = /^(NOPERM .*'fcall'|ERR unknown command 'fcall')/i.test(error.message) ? 'FCALL' : 'FUNCTION LOAD';
    new Logger('Sluice').warn(
      `Redis refused ${refused} (${quotedReply(error.message)}): the scripts run through EVALSHA instead of Sluice's Lua function library, which costs Redis more per call (grant +function|load and +fcall to use the library)`,
    );
  }

  /** The keys a call of `script` declares: its own, and the slot guard where there is one. */
  private keyCount(script: LuaScript): number {
    return script.numberOfKeys - SLOT_GUARD_KEYS + this.guard.length;
  }

  private get(name: ScriptName, keys: string[]): LuaScript {
    const script = this.scripts.get(name);
    if (!script) throw new Error(`unknown Lua script ${name}`);
    if (keys.length + SLOT_GUARD_KEYS !== script.numberOfKeys)
      throw new Error(`script ${name} takes ${script.numberOfKeys - SLOT_GUARD_KEYS} keys (and the slot guard), got ${keys.length}`);
    return script;
  }
}
