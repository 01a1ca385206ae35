import type Redis from 'ioredis';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { scriptNames } from '../../lib/redis/lua.scripts';
import type { RedisKeys } from '../../lib/redis/redis.keys';

/** The Lua scripts of nest-sluice 0.1.0 (commit 8710ae8), the writers of key layout 1. */
export const LAYOUT_1_LUA = join(__dirname, '..', 'fixtures', 'layout-1', 'lua');

/** A 0.1.0 script as its loader read it: includes inlined, key count from the header's highest KEYS[n] (no shebang, no slot guard then). */
function loadLayout1Script(name: string): { numberOfKeys: number; lua: string } {
  const raw = readFileSync(join(LAYOUT_1_LUA, `${name}.lua`), 'utf8');
  const lua = raw.replace(/^-- @include (\S+)\s*$/gm, (_, include: string) =>
    readFileSync(join(LAYOUT_1_LUA, 'includes', `${include}.lua`), 'utf8'),
  );
  const header = /^--\[\[([\s\S]*?)\]\]/.exec(raw)![1];
  return { numberOfKeys: Math.max(0, ...[...header.matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1]))), lua };
}

/** A claim as layout 1's reserve replied it. */
export interface Layout1Claim {
  id: string;
  workflow: string;
  token: string;
  attempt: number;
}

type Arg = string | number;

/**
 * Writes a namespace the way a 0.1.0 process did: its own scripts (test/fixtures/layout-1),
 * registered on the given connection under `layout1_<name>`, with the arguments 0.1.0 passed.
 * Inputs, results and step values are JSON, as 0.1.0's payload codec wrote them.
 */
export class Layout1Writer {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
  ) {
    for (const name of scriptNames(LAYOUT_1_LUA)) {
      const command = `layout1_${name.replace(/-/g, '_')}`;
      if (!(command in redis)) redis.defineCommand(command, loadLayout1Script(name));
    }
  }

  /** A worker bootstrap of 0.1.0: registers the workflows and writes the caps (field, limit or '', workflow, group). */
  declareLimits(workflows: string[], caps: Array<[string, Arg, string, string]>): Promise<string[]> {
    const { keys } = this;
    return this.call(
      'declare-limits',
      [keys.limits, keys.workflows, keys.seq],
      [keys.base, workflows.length, ...workflows, ...caps.flat()],
    );
  }

  /** 0.1.0's enqueue, fast path off. Resolves the state the run got. */
  async enqueue(
    workflow: string,
    id: string,
    input: unknown,
    opts: { priority?: number; delayMs?: number; group?: string; attempts?: number } = {},
  ): Promise<string> {
    const { keys } = this;
    const [, state] = await this.call<[number, string]>(
      'enqueue',
      [keys.run(id), keys.leases, keys.limits, keys.seq],
      [
        keys.base,
        id,
        workflow,
        JSON.stringify(input),
        opts.priority ?? 0,
        opts.delayMs ?? 0,
        '',
        opts.attempts ?? 3,
        opts.group ?? '',
        0,
        30_000,
        0,
      ],
    );
    return state;
  }

  /** 0.1.0's reserve: claims up to `max` runs of `workflows` with a lease of `lockMs` (no stalled scan). */
  async reserve(workflows: string[], max: number, lockMs: number): Promise<Layout1Claim[]> {
    const { keys } = this;
    const reply = await this.call<unknown[]>(
      'reserve',
      [keys.leases, keys.limits, keys.seq, keys.stallGate],
      [keys.base, max, lockMs, 0, 3, 256, 86_400_000, 'layout1-worker', ...workflows],
    );
    return (reply.slice(1) as unknown[][]).map(([id, workflow, token, attempt]) => ({
      id: String(id),
      workflow: String(workflow),
      token: String(token),
      attempt: Number(attempt),
    }));
  }

  /** 0.1.0's save-steps: one step result (`name#occurrence`) under the run's lease. */
  async saveStep(claim: Layout1Claim, stepKey: string, value: unknown): Promise<void> {
    const [saved] = await this.call<number[]>(
      'save-steps',
      [this.keys.leases],
      [this.keys.base, claim.id, claim.token, stepKey, JSON.stringify(value)],
    );
    if (saved !== 1) throw new Error(`layout-1 save-steps refused ${claim.id} ${stepKey}`);
  }

  /** 0.1.0's complete of one run, claiming nothing. */
  async complete(claim: Layout1Claim, result: unknown): Promise<void> {
    const { keys } = this;
    const reply = await this.call<[[number[]]]>(
      'complete',
      [keys.leases, keys.limits, keys.seq],
      [keys.base, 86_400_000, 0, 30_000, 0, 0, claim.id, claim.token, JSON.stringify(result)],
    );
    if (reply[0][0][0] !== 1) throw new Error(`layout-1 complete refused ${claim.id}`);
  }

  private call<T>(name: string, keys: string[], args: Arg[]): Promise<T> {
    return (this.redis as unknown as Record<string, (...a: Arg[]) => Promise<T>>)[`layout1_${name.replace(/-/g, '_')}`](...keys, ...args);
  }
}
