import { parseCompleteReply } from '../../lib/redis/commands/complete.command';
import { newCallId } from '../../lib/redis/commands/call-id';
import type Redis from 'ioredis';
import type { GroupStats, QueueStats } from '../../lib/interfaces/queue.stats';
import { readStats } from '../../lib/redis/commands/stats.command';
import type { LuaScripts } from '../../lib/redis/lua.scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { enqueueReply } from './queue-state';

/**
 * A namespace driven through the Lua scripts directly (no app), and the invariants that must
 * hold after every script call: each run in exactly one place, per-level active counts equal
 * to the runs active at that level, caps held by every claim, the round-robin index (`ready`)
 * and the group index (`groups`) consistent with the lanes, and stats consistent with it all.
 */
export const WORKFLOWS = ['w1', 'w2'];
export const GROUPS = ['', 'g1', 'g2', 'g3'];
export const LOCK_MS = 600_000;
const TTL_MS = 3_600_000;
const MAX_STALLS = 2;

export interface RunRow {
  state: string | null;
  token: string | null;
}
export interface Lane {
  queue: string[];
  waiting: string[];
  active: string[];
}
export interface WorkflowState {
  active: string[];
  delayed: string[];
  ready: string[];
  groups: string[];
  wake: string[];
  lanes: Record<string, Lane>;
}
export interface Snapshot {
  runs: Map<string, RunRow>;
  leases: string[];
  limits: Record<string, string>;
  workflows: Record<string, WorkflowState>;
}

export class FlowModel {
  readonly keys: RedisKeys;
  /** Every run ever enqueued: what the test knows without asking Redis. */
  readonly known = new Map<string, { wf: string; group: string; priority: number }>();
  private next = 0;

  constructor(
    private readonly redis: Redis,
    private readonly scripts: LuaScripts,
    namespace: string,
  ) {
    this.keys = new RedisKeys('sluice', namespace);
  }

  get base(): string {
    return this.keys.base;
  }

  async enqueue(wf: string, group: string, priority: number, delayMs: number, fast: boolean): Promise<[number, string]> {
    const id = `r${this.next++}`;
    this.known.set(id, { wf, group, priority });
    // Every other run is stored as a compact record (defaults left out): both forms go through every script.
    const compact = this.next % 2 === 0 ? 1 : 0;
    const args: (string | number)[] = [this.base, id, wf, `{"i":${this.next}}`, `${fast ? 1 : 0}${compact}1`, LOCK_MS, '', ''];
    if (priority) args.push('priority', priority);
    if (delayMs) args.push('delay', delayMs);
    if (group) args.push('group', group);
    return enqueueReply(await this.scripts.run<string>('enqueue', [this.keys.run(id)], args));
  }

  reserve(n: number, workflows: string[], scan = false): Promise<unknown[]> {
    const { keys } = this;
    return this.scripts.run(
      'reserve',
      [keys.stallGate, keys.call(newCallId())],
      [this.base, n, LOCK_MS, scan ? 60_000 : 0, MAX_STALLS, 256, TTL_MS, 'model-worker', 0, 0, ...workflows],
    );
  }

  /** The complete script for one run and no steps; replies { run statuses, claims… }. */
  async complete(id: string, token: string, refill: number): Promise<[number[], ...unknown[]]> {
    const { keys } = this;
    const { completed, claims } = parseCompleteReply(
      await this.scripts.run<unknown[]>(
        'complete',
        [keys.call(newCallId())],
        [this.base, TTL_MS, refill, LOCK_MS, 0, '', 0, '', WORKFLOWS.length, ...WORKFLOWS, 0, id, token, '"ok"', ''],
      ),
    );
    return [completed.map(Number), ...claims];
  }

  fail(id: string, token: string, retryable: boolean, backoffMs: number): Promise<string> {
    return this.scripts.run('fail', this.runKeys(id), [
      this.base,
      id,
      token,
      '{"name":"Error","message":"boom"}',
      retryable ? 1 : 0,
      backoffMs,
      TTL_MS,
    ]);
  }

  release(id: string, token: string): Promise<number> {
    return this.scripts.run('release', this.runKeys(id), [this.base, id, token]);
  }

  setLimit(field: string, limit: number | null): Promise<string> {
    return this.scripts.run('set-limits', [this.keys.limits, this.keys.seq], [this.base, field, limit ?? '', ...scopeOf(field)]);
  }

  declare(fields: Record<string, number | null>): Promise<string[]> {
    return this.scripts.run(
      'declare-limits',
      [this.keys.limits, this.keys.workflows, this.keys.seq],
      [
        this.base,
        WORKFLOWS.length,
        ...WORKFLOWS,
        ...Object.entries(fields).flatMap(([field, limit]) => [field, limit ?? '', ...scopeOf(field)]),
      ],
    );
  }

  stats(): Promise<QueueStats> {
    return readStats(this.scripts, this.keys, { workflows: [], groups: true });
  }

  key(wf: string, suffix: 'active' | 'delayed' | 'ready' | 'groups' | 'wake' | 'parked'): string {
    return this.keys.workflow(wf, suffix);
  }

  async snapshot(): Promise<Snapshot> {
    const p = this.redis.pipeline();
    const ids = [...this.known.keys()];
    ids.forEach((id) => p.hmget(this.keys.run(id), 'state', 'token'));
    p.zrange(this.keys.leases, 0, -1).hgetall(this.keys.limits);
    for (const wf of WORKFLOWS) {
      p.smembers(this.key(wf, 'active')).zrange(this.key(wf, 'delayed'), 0, -1).zrange(this.key(wf, 'ready'), 0, -1);
      p.smembers(this.key(wf, 'groups')).lrange(this.key(wf, 'wake'), 0, -1);
      for (const g of GROUPS) {
        p.lrange(this.keys.lane(wf, g, 'queue'), 0, -1).zrange(this.keys.lane(wf, g, 'waiting'), 0, -1);
        if (g) p.smembers(this.keys.lane(wf, g, 'active')); // ungrouped runs hold no lane slot
      }
    }
    const replies = ((await p.exec()) ?? []).map(([error, value]) => {
      if (error) throw error;
      return value;
    });
    const take = <T>() => replies.shift() as T;
    const runs = new Map(
      ids.map((id) => {
        const [state, token] = take<(string | null)[]>();
        return [id, { state, token }];
      }),
    );
    const snapshot: Snapshot = { runs, leases: take(), limits: take(), workflows: {} };
    for (const wf of WORKFLOWS) {
      const state: WorkflowState = { active: take(), delayed: take(), ready: take(), groups: take(), wake: take(), lanes: {} };
      for (const g of GROUPS) state.lanes[g] = { queue: take(), waiting: take(), active: g ? take() : [] };
      snapshot.workflows[wf] = state;
    }
    return snapshot;
  }

  private runKeys(id: string): string[] {
    return [this.keys.run(id), this.keys.leases, this.keys.limits, this.keys.seq];
  }
}

export function groupCap(limits: Record<string, string>, wf: string, group: string): number | null {
  const value = limits[`wf:${wf}:g:${group}`] ?? limits[`wf:${wf}:group`];
  return value === undefined ? null : Number(value);
}

const cap = (value: string | undefined) => (value === undefined ? null : Number(value));
const sorted = (xs: string[]) => [...xs].sort();
/** JSON with object keys sorted, so key order (e.g. SMEMBERS order) does not matter. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_, v) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b))) : v,
  );

/**
 * Checks `next` (taken after one script call) against the invariants; `prev` is the snapshot
 * before the call. Throws on a violation; returns the groups found in `ready` without room.
 */
export function checkInvariants(model: FlowModel, prev: Snapshot, next: Snapshot, stats: QueueStats): string[] {
  const fail = (what: string) => {
    throw new Error(`invariant broken: ${what}`);
  };
  // 1. Every run exists and is in exactly the places its state says.
  const places = new Map<string, string[]>();
  const put = (id: string, place: string) => {
    if (!model.known.has(id)) fail(`unknown member ${id} in ${place}`);
    places.set(id, [...(places.get(id) ?? []), place]);
  };
  next.leases.forEach((id) => put(id, 'leases'));
  for (const wf of WORKFLOWS) {
    const w = next.workflows[wf];
    w.active.forEach((id) => put(id, `${wf}:active`));
    w.delayed.forEach((id) => put(id, `${wf}:delayed`));
    for (const g of GROUPS) {
      const lane = w.lanes[g];
      lane.queue.forEach((id) => put(id, `${wf}/${g}:queue`));
      lane.waiting.forEach((id) => put(id, `${wf}/${g}:waiting`));
      lane.active.forEach((id) => put(id, `${wf}/${g}:active`));
    }
  }
  for (const [id, { wf, group, priority }] of model.known) {
    const { state } = next.runs.get(id)!;
    const expected: Record<string, string[]> = {
      waiting: [`${wf}/${group}:${priority === 0 ? 'queue' : 'waiting'}`],
      delayed: [`${wf}:delayed`],
      active: ['leases', `${wf}:active`, ...(group ? [`${wf}/${group}:active`] : [])],
      completed: [],
      failed: [],
    };
    if (!state || !expected[state]) fail(`run ${id} has state ${state}`);
    const actual = sorted(places.get(id) ?? []);
    if (actual.join() !== sorted(expected[state!]).join())
      fail(`run ${id} (${state}) is in [${actual.join()}], expected [${expected[state!].join()}]`);
  }

  // 2. Active counts per level equal the runs active at that level.
  const activeRuns = [...model.known].filter(([id]) => next.runs.get(id)!.state === 'active');
  const count = (wf?: string, group?: string) =>
    activeRuns.filter(([, r]) => (wf === undefined || r.wf === wf) && (group === undefined || r.group === group)).length;
  if (next.leases.length !== count()) fail(`ZCARD leases ${next.leases.length} != ${count()} active runs`);
  for (const wf of WORKFLOWS) {
    const w = next.workflows[wf];
    if (w.active.length !== count(wf)) fail(`SCARD ${wf}:active ${w.active.length} != ${count(wf)}`);
    for (const g of GROUPS.slice(1)) if (w.lanes[g].active.length !== count(wf, g)) fail(`SCARD ${wf}/${g}:active != ${count(wf, g)}`);
  }

  // 3. A run claimed by this call found room at every level: no level is above its cap after it.
  for (const [id, { wf, group }] of activeRuns) {
    const before = prev.runs.get(id);
    if (before?.state === 'active' && before.token === next.runs.get(id)!.token) continue;
    const levels: Array<[string, number, number | null]> = [
      ['namespace', count(), cap(next.limits.ns)],
      [`workflow ${wf}`, count(wf), cap(next.limits[`wf:${wf}`])],
      ...(group ? [[`group ${wf}/${group}`, count(wf, group), groupCap(next.limits, wf, group)] as [string, number, number | null]] : []),
    ];
    for (const [level, n, limit] of levels) if (limit !== null && n > limit) fail(`claim of ${id} took ${level} to ${n} > cap ${limit}`);
  }

  // 4. The group indexes follow the lanes; 5. stats agree with the runs.
  const readyWithoutRoom: string[] = [];
  const states = (wf: string, state: string) =>
    [...model.known].filter(([id, r]) => r.wf === wf && next.runs.get(id)!.state === state).length;
  const expectedStats: QueueStats = { namespace: { active: count(), limit: cap(next.limits.ns) }, workflows: {} };
  for (const wf of WORKFLOWS) {
    const w = next.workflows[wf];
    const busy: Record<string, GroupStats> = {};
    for (const g of GROUPS.slice(1)) {
      const due = w.lanes[g].queue.length + w.lanes[g].waiting.length;
      const limit = groupCap(next.limits, wf, g);
      const room = limit === null || count(wf, g) < limit;
      const ready = w.ready.includes(g);
      if (ready && due === 0) fail(`${wf}/${g} is in ready with no due run`);
      if (due > 0 && room && !ready) fail(`${wf}/${g} has ${due} due run(s) and room but is not in ready`);
      if (ready && !room) readyWithoutRoom.push(`${wf}/${g}`);
      if (due > 0 || count(wf, g) > 0) busy[g] = { waiting: due, active: count(wf, g), limit, paused: false, rateLimit: null };
    }
    if (w.ready.some((g) => !GROUPS.slice(1).includes(g))) fail(`ready of ${wf} holds [${w.ready.join()}]`);
    if (sorted(w.groups).join() !== sorted(Object.keys(busy)).join())
      fail(`groups of ${wf} is [${w.groups.join()}], expected [${Object.keys(busy).join()}]`);
    expectedStats.workflows[wf] = {
      waiting: states(wf, 'waiting'),
      delayed: states(wf, 'delayed'),
      active: count(wf),
      limit: cap(next.limits[`wf:${wf}`]),
      groupLimit: cap(next.limits[`wf:${wf}:group`]),
      completed: states(wf, 'completed'),
      failed: states(wf, 'failed'),
      groups: busy,
      cancelled: 0,
      paused: false,
      rateLimit: null,
      groupRateLimit: null,
      sleeping: 0,
      waitingSignal: 0,
      waitingEvent: 0,
      waitingChild: 0,
    };
  }
  if (canonical(stats) !== canonical(expectedStats)) fail(`stats ${canonical(stats)} != ${canonical(expectedStats)}`);
  return readyWithoutRoom;
}

/** The workflow and group a limits field concerns: 'ns' → ['', ''], 'wf:w:group' → ['w', '*'], 'wf:w:g:x' → ['w', 'x']. */
function scopeOf(field: string): [string, string] {
  const [, wf = '', rest] = /^wf:([^:]+)(?::(.*))?$/.exec(field) ?? [];
  return [wf, rest === 'group' ? '*' : rest?.startsWith('g:') ? rest.slice(2) : ''];
}
