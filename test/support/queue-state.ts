import type Redis from 'ioredis';
import type { RedisKeys } from '../../lib/redis/redis.keys';
import { runIdTime } from '../../lib/workflow/run-id';
import { nodeFor } from './nodes';
import { channelSubscribers } from './pubsub';
import { pollUntil } from './workflows';

/**
 * Raw-Redis helpers for tests of the enqueue fast path and of the worker's batched commits:
 * reading the queue's keys directly, and faking a parked worker.
 */

/** The member a test writes into a parked zset to stand for a worker that is not there. */
export const FAKE_WORKER = 'fake-worker';

/** The Redis clock in ms (scripts use it, not the test process's clock). */
export async function redisTimeMs(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** Registers a parked worker that never blocks: the fast path sees a taker, but nobody takes. */
export async function fakePark(redis: Redis, keys: RedisKeys, workflow: string, expiresAtMs = Date.now() + 3_600_000): Promise<void> {
  await redis.zadd(keys.workflow(workflow, 'parked'), expiresAtMs, FAKE_WORKER);
}

/**
 * Waits until `atLeast` workers have announced that they are blocking on `workflow` and each that
 * takes handoffs over its channel (an entry `<id>:h:<lease ms>`) listens on it: until then a
 * handoff published to it reaches no one and its enqueue queues the run (no event exists for either).
 */
export function waitParked(redis: Redis, keys: RedisKeys, workflow: string, atLeast = 1): Promise<number> {
  const takers = async () => {
    const entries = await redis.zrange(keys.workflow(workflow, 'parked'), 0, -1);
    const listening = await Promise.all(
      entries.map(async (entry) => {
        const [id, channel] = entry.split(':');
        return channel !== 'h' || (await channelSubscribers(redis, keys.handoff(id))) > 0;
      }),
    );
    return listening.filter(Boolean).length;
  };
  return pollUntil(takers, (n) => n >= atLeast, `${atLeast} parked worker(s) on ${workflow}, listening for handoffs`);
}

/** The wake list entry the fast path leaves for a run: '<token> <id> <encoded input>', with the run's token as stored. */
export async function handoffEntry(redis: Redis, keys: RedisKeys, id: string, input: unknown): Promise<string> {
  return `${await redis.hget(keys.run(id), 'token')} ${id} ${JSON.stringify(input)}`;
}

/** The first lease token of a run created at `createdAt` (ms): tokens count up from createdAt × 1000. */
/** A run's creation time as its readers derive it: the record's `createdAt`, or (a lean record of a generated id) the id's. */
export async function createdAtOf(redis: Redis, keys: RedisKeys, id: string): Promise<number> {
  const stored = await redis.hget(keys.run(id), 'createdAt');
  return stored === null ? runIdTime(id)! : Number(stored);
}

export function firstToken(createdAt: string | number): string {
  return String(BigInt(createdAt) * 1000n + 1n);
}

/** KEYS of lua/enqueue.lua, in header order. */
export function enqueueKeys(keys: RedisKeys, id: string): string[] {
  return [keys.run(id)];
}

/** What {@link enqueueArgs} sends beyond a plain run: the script's optional name/value pairs and its nonce. */
export interface EnqueueExtras {
  nonce?: string;
  group?: string;
  priority?: number;
  delayMs?: number;
  attempts?: number;
  trace?: string;
  timeoutMs?: number;
}

/**
 * ARGV of lua/enqueue.lua (see its header) for a full (not lean) record of a caller-given id, due
 * now, priority 0, 3 attempts, no group unless `extras` says otherwise; `waited`: publish the
 * outcome, as run() asks.
 */
export function enqueueArgs(
  keys: RedisKeys,
  workflow: string,
  id: string,
  input: unknown,
  fastPath: boolean,
  lockMs = 30_000,
  waited = false,
  extras: EnqueueExtras = {},
): (string | number)[] {
  const args: (string | number)[] = [
    keys.base,
    id,
    workflow,
    JSON.stringify(input),
    `${fastPath ? 1 : 0}01`,
    lockMs,
    waited ? '1' : '',
    extras.nonce ?? '',
  ];
  if (extras.priority) args.push('priority', extras.priority);
  if (extras.delayMs) args.push('delay', extras.delayMs);
  if (extras.attempts !== undefined) args.push('attempts', extras.attempts);
  if (extras.group) args.push('group', extras.group);
  if (extras.trace) args.push('trace', extras.trace);
  if (extras.timeoutMs !== undefined) args.push('timeout', extras.timeoutMs);
  return args;
}

/** lua/enqueue.lua's reply as [created 1 | 0, state] ('+active' is [1, 'active']). */
export function enqueueReply(reply: string): [number, string] {
  return [reply[0] === '+' ? 1 : 0, reply.slice(1)];
}

/**
 * How many due runs a lane holds: its FIFO list (priority 0) plus its priority zset. A run that
 * went through neither was never queued as due.
 */
export async function dueInLane(redis: Redis, keys: RedisKeys, workflow: string, group?: string): Promise<number> {
  const [queued, waiting] = await Promise.all([
    redis.llen(keys.lane(workflow, group, 'queue')),
    redis.zcard(keys.lane(workflow, group, 'waiting')),
  ]);
  return queued + waiting;
}

/** Whether `id` is queued as due in a lane (its FIFO list or its priority zset). */
export async function isDueInLane(redis: Redis, keys: RedisKeys, workflow: string, id: string, group?: string): Promise<boolean> {
  const [position, score] = await Promise.all([
    redis.lpos(keys.lane(workflow, group, 'queue'), id),
    redis.zscore(keys.lane(workflow, group, 'waiting'), id),
  ]);
  return position !== null || score !== null;
}

/**
 * Samples SCARD of a workflow's active set until stopped: the highest count seen and how many
 * samples were taken (so a test can show the sampler really ran).
 */
export function sampleActive(redis: Redis, key: string): { stop(): Promise<{ max: number; count: number }> } {
  let sampling = true;
  const seen = { max: 0, count: 0 };
  const loop = (async () => {
    while (sampling) {
      seen.max = Math.max(seen.max, await redis.scard(key));
      seen.count++;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  })();
  return {
    async stop() {
      sampling = false;
      await loop;
      return seen;
    },
  };
}

/**
 * Records every write to a lane's due-run keys (its FIFO list and its priority zset) from now
 * until `writes()` is called, through Redis keyspace notifications. The proof that a run never
 * went through the queue: a run queued and claimed at once leaves no trace in the lane, but its
 * push does here. Enables list and zset keyspace events on the (private, test) server — on a
 * cluster, on the master serving the namespace, and listens there: a node only notifies of its
 * own keys, and a watcher on another node would see nothing and prove nothing.
 */
export async function watchLane(redis: Redis, keys: RedisKeys, workflow: string, group?: string): Promise<{ writes(): Promise<string[]> }> {
  const node = await nodeFor(redis, keys.base);
  const flags = ((await node.config('GET', 'notify-keyspace-events')) as string[])[1] ?? '';
  const missing = ['K', 'l', 'z'].filter((flag) => !flags.includes(flag) && !(flag !== 'K' && flags.includes('A')));
  if (missing.length) await node.config('SET', 'notify-keyspace-events', flags + missing.join(''));
  const subscriber = node.duplicate();
  const seen: string[] = [];
  const watched = [keys.lane(workflow, group, 'queue'), keys.lane(workflow, group, 'waiting')];
  subscriber.on('pmessage', (_pattern: string, channel: string, event: string) =>
    seen.push(`${event} ${channel.slice(channel.indexOf(':') + 1)}`),
  );
  await subscriber.psubscribe(...watched.map((key) => `__keyspace@*__:${key}`));
  return {
    async writes() {
      await subscriber.ping(); // replies come in order: every event raised before now has arrived
      await subscriber.quit();
      return seen;
    },
  };
}
