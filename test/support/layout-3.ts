import type Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { loadScript } from '../../lib/redis/lua.source';
import type { RedisKeys } from '../../lib/redis/redis.keys';

/** The scripts of the last layout-3 code (commit 2cf6a33), which knew no lean run record. */
export const LAYOUT_3_LUA = join(__dirname, '..', 'fixtures', 'layout-3', 'lua');

/** A claim as layout 3's reserve replied it. */
export interface Layout3Claim {
  id: string;
  workflow: string;
  token: string;
  attempt: number;
  input: string;
}

type Arg = string | number;

/**
 * A worker and producer of the previous release: its own scripts (test/fixtures/layout-3),
 * registered on the given connection under `layout3_<name>`, called with the arguments that
 * release passed (fast path off, no telemetry extras, no stalled scan).
 */
export class Layout3Process {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
  ) {
    for (const name of ['enqueue', 'reserve', 'complete']) {
      const script = loadScript(name, LAYOUT_3_LUA);
      if (!(`layout3_${name}` in redis)) redis.defineCommand(`layout3_${name}`, { numberOfKeys: script.numberOfKeys, lua: script.source });
    }
  }

  /** Its enqueue of a caller-given id with a JSON input. Resolves the state the run got. */
  async enqueue(workflow: string, id: string, input: unknown): Promise<string> {
    const { keys } = this;
    const [, state] = await this.call<[number, string]>(
      'enqueue',
      [keys.run(id), keys.leases, keys.limits, keys.seq],
      [keys.base, id, workflow, JSON.stringify(input), 0, 0, '', 3, '', 0, 30_000, 0, randomBytes(8).toString('hex')],
    );
    return state;
  }

  /** Its reserve: claims up to `max` runs of `workflows`. */
  async reserve(workflows: string[], max: number, lockMs = 30_000): Promise<Layout3Claim[]> {
    const { keys } = this;
    const reply = await this.call<unknown[]>(
      'reserve',
      [keys.leases, keys.limits, keys.seq, keys.stallGate, keys.call(randomBytes(8).toString('hex'))],
      [keys.base, max, lockMs, 0, 3, 256, 86_400_000, 'layout3-worker', 0, ...workflows],
    );
    return (reply.slice(1) as unknown[][]).map(([id, workflow, token, attempt, , input]) => ({
      id: String(id),
      workflow: String(workflow),
      token: String(token),
      attempt: Number(attempt),
      input: String(input),
    }));
  }

  /** Its complete of a batch of claims with JSON results, claiming nothing. Resolves 1 per run completed, 0 per lease lost. */
  async complete(claims: Array<{ claim: Layout3Claim; result: unknown }>): Promise<number[]> {
    const { keys } = this;
    const reply = await this.call<[[number[]]]>(
      'complete',
      [keys.leases, keys.limits, keys.seq, keys.call(randomBytes(8).toString('hex'))],
      [
        keys.base,
        86_400_000,
        0,
        30_000,
        0,
        '',
        0,
        0,
        0,
        ...claims.flatMap(({ claim, result }) => [claim.id, claim.token, JSON.stringify(result), '']),
      ],
    );
    return reply[0][0];
  }

  private call<T>(name: string, keys: string[], args: Arg[]): Promise<T> {
    const guard = this.keys.slotGuard(false);
    return (this.redis as unknown as Record<string, (...a: Arg[]) => Promise<T>>)[`layout3_${name}`](...keys, ...guard, ...args);
  }
}
