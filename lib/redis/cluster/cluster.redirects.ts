import type { Redis } from 'ioredis';

/**
 * A cluster's answer that a command did not run on this node: `MOVED` (the slot is served
 * elsewhere now: resharding or failover), `ASK` (the slot is migrating and the keys are on the
 * target), `TRYAGAIN` (the slot is migrating and the keys are split) or `CLUSTERDOWN` (the
 * cluster is failing over). Nothing ran, so the call is sent again — also a call that is not
 * idempotent — once the slot has settled (see RedisLink). Sluice never follows `ASK` with
 * `ASKING`: its scripts declare keys that never exist, so Redis refuses every script while the
 * slot migrates, and a script can never stop halfway for want of a key (lib/redis/lua.scripts.ts).
 */
export class ClusterRedirect extends Error {
  constructor(
    message: string,
    /** The connection the reply came over. */
    readonly connection: Redis,
    /** `host:port` of a `MOVED` reply: the slot's new owner. */
    readonly movedTo?: string,
  ) {
    super(message);
    this.name = 'ClusterRedirect';
  }
}

/** The redirect a reply error is, if it is one. */
export function clusterRedirect(error: Error, connection: Redis): ClusterRedirect | undefined {
  if (error?.name !== 'ReplyError') return undefined;
  const moved = /^MOVED \d+ (\S+)/.exec(error.message);
  if (moved) return new ClusterRedirect(error.message, connection, moved[1]);
  return /^(ASK|TRYAGAIN|CLUSTERDOWN) /.test(error.message) ? new ClusterRedirect(error.message, connection) : undefined;
}

/**
 * When the namespace's slot leaves a node, Redis 7 unsubscribes that node's clients from the
 * slot's sharded channels, pushing `sunsubscribe <channel> <count>` unasked. ioredis 5 reports
 * it only as an 'error' event ("Command queue state error … Last reply: sunsubscribe,…"): the
 * connection is fine, but its subscriptions are gone (RedisConnections follows the slot). If a
 * subscribe was pending, ioredis takes the push for its reply instead, and the subscribe's own
 * `MOVED` reply then surfaces the same way ("… Last error: MOVED …").
 */
export function isSlotLeftPush(error: Error): boolean {
  return /Command queue state error.*Last (reply: sunsubscribe,|error: (MOVED|ASK) )/.test(error?.message ?? '');
}
