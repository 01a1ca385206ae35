import type Redis from 'ioredis';
import type { RedisKeys } from '../../lib/redis/redis.keys';
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
  await redis.zadd(keys.parked(workflow), expiresAtMs, FAKE_WORKER);
}

/** Waits until some worker has announced that it is blocking on `workflow` (no event exists for it). */
export function waitParked(redis: Redis, keys: RedisKeys, workflow: string, atLeast = 1): Promise<number> {
  return pollUntil(() => redis.zcard(keys.parked(workflow)), (n) => n >= atLeast, `${atLeast} parked worker(s) on ${workflow}`);
}

/** The wake list entry the fast path leaves for a run: '<token> <id> <encoded input>'. */
export function handoffEntry(id: string, input: unknown, token = 1): string {
  return `${token} ${id} ${JSON.stringify(input)}`;
}

/** KEYS of lua/enqueue.lua, in header order. */
export function enqueueKeys(keys: RedisKeys, workflow: string, id: string): string[] {
  return [
    keys.run(id), keys.waiting(workflow), keys.delayed, keys.wake(workflow), keys.seq,
    keys.leases, keys.limits, keys.active(workflow), keys.parked(workflow),
  ];
}

/** ARGV of lua/enqueue.lua for a run due now, priority 0, 3 attempts, no group. */
export function enqueueArgs(workflow: string, id: string, input: unknown, fastPath: boolean, lockMs = 30_000): (string | number)[] {
  return [id, workflow, JSON.stringify(input), 0, 0, '', 3, '', fastPath ? 1 : 0, lockMs];
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
