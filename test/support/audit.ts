import type Redis from 'ioredis';
import { scanKeys } from './scan';

/**
 * The consistency audit of a namespace's raw Redis state, shared by the fault tests: after a
 * crash, a partition or a drain, is every run where its state says, and do the indexes, the
 * active counts and the caps agree? It reads the state the Lua scripts leave behind (key layout:
 * lib/redis/redis.keys.ts), never through the library.
 *
 * It reads one snapshot: SCAN for the namespace's keys, then every read in one MULTI. Keys created
 * between the SCAN and the MULTI are missed, so audit a namespace at rest: workers stopped or
 * idle, or at least no enqueues in flight. (Runs executing are fine: an active run is a state.)
 *
 * Rules (the `rule` of each violation):
 * - `run-record`: a run hash without a known `state` or without a `workflow`.
 * - `run-place`: a run is not in exactly the places its state says. waiting: its lane's FIFO list
 *   (priority 0) or priority zset (priority > 0) of its workflow and group, once; delayed: its
 *   workflow's delayed zset (a run in a durable wait without a deadline: none of those — see
 *   `wait-index`); active: the leases zset, its workflow's active set and, if grouped,
 *   its group's active set — plus at most one fast-path handoff (`<token> <id> <input>` in its
 *   workflow's wake list) carrying its current token; completed / failed / cancelled: none of those.
 * - `orphan-member`: a lane, delayed or active set member with no run record.
 * - `orphan-popped`: the namespace's `orphans` list (where a claim puts an id it popped from a lane
 *   and found no run record for) is not empty: an `orphan-member` existed and was dropped.
 * - `lease-without-active-run`: a leases member whose run is missing or not active.
 * - `handoff`: a wake list entry other than the marker '1' that is malformed, or whose run is not
 *   active with that token.
 * - `active-count`: ZCARD leases ≠ the sum of the workflows' active set sizes, or an active set
 *   (workflow or group) ≠ the runs active at that level.
 * - `cap-exceeded`: more active runs than a cap in the limits hash (`ns`, `wf:<name>`, a group's
 *   `wf:<name>:g:<group>` override, else `wf:<name>:group`). A cap lowered at runtime while runs
 *   were active legitimately leaves it exceeded until they finish: pass `checkCaps: false` then.
 * - `group-index`: a group in its workflow's round-robin (`ready`) with no due run; a group with
 *   due runs and room under its cap (not paused, not held by its rate limit) missing from it; the `groups` set ≠ the groups with due or
 *   active runs (the invariants test/support/flow-model.ts checks after every script call).
 * - `acknowledged` (when `acknowledged` is given): an acknowledged id with no run, or a run count
 *   (waiting + delayed + active + completed + failed + cancelled) ≠ the number of acknowledged ids.
 * - `stats` (when `acknowledged` is given, i.e. the test knows every run and none expired): a
 *   workflow's running totals of completed / failed runs ≠ its runs in those states — a result
 *   committed twice counts twice.
 * - `finish-index`: a finish index entry pointing to a run in another state or workflow, or a
 *   finished run missing from its index (see auditFinishIndexes).
 * - `wait-record` (durable waits, lua/includes/waits.lua): a `wait` field that does not parse as
 *   '<sleep|signal|event|child> <deadline> <memo key> <target>', or on a run that is neither
 *   'delayed' (in the wait) nor 'waiting' (a timed wait that came due and was promoted by a
 *   version that leaves the wait recorded until the claim ends it, as f42eab8 did — reserve now
 *   ends it as it promotes; a mixed fleet may still leave such runs: only a wait with a deadline,
 *   at or before the Redis time of the audit); a `waitLeft` without a child wait.
 * - `wait-index`: a run in a wait (state 'delayed') is not in exactly its kind's index
 *   (`wf:<name>:sleeping` / `:waiting-signal` / `:waiting-event` / `:waiting-child`) scored at its
 *   deadline (2^52 for none), or is in `wf:<name>:delayed` although it has no deadline, or is there
 *   at another score, or (kind event) is missing from `event:<name>|<key>`. A wait promoted with
 *   its record left (state 'waiting', see `wait-record`) is still in its kind's index at its
 *   deadline (the claim takes it out, endWaitByTime) and no longer in `delayed`; it may still be in
 *   its event set (a sendEvent that found it no longer waiting dropped it or not). A wait index
 *   member or event set member with no run record, or whose run is not in that wait (another kind,
 *   target or workflow, or no wait).
 * - `wait-child`: a run waiting for child workflows: its `waitLeft` ≠ the number of its listed
 *   children whose outcome (memo `step:<memo key>`, the key from the child's `parent` field
 *   '<parent id> <memo key>') is not in its record yet; a listed child whose outcome is missing
 *   that has no record, is finished, is not linked to this parent under that key, or lacks
 *   `links` (its finish would not resume the parent). Read in a second MULTI (the memo fields are
 *   known only from the children's records), skipped for a parent whose wait changed in between.
 * - `mailbox`: a `mailbox:<id>` list of a run that does not exist, is finished (finishRun drops
 *   it), or lacks `links`; an entry that is not '<signal name> <envelope>'.
 * - `rate-review`: a workflow's `rate-review` zset (groups a review after a rate limit was raised
 *   or removed has yet to look at) without its flag `wf:<name>:rate-review` in the limits hash, or
 *   a `rate-held` zset with no control left in the namespace (`controls` absent): nothing would
 *   bring those groups back (lua/includes/rate-reviews.lua startRateReview).
 * - `schedule-index`: the derived schedule keys disagree with the schedule hashes (the truth): a
 *   hash missing from `schedules` or its workflow's listing; an unpaused one not in its workflow's
 *   `next-fires` at its `next`, a paused one in it; an index or listing entry without a hash of
 *   that workflow.
 */

export type RunState = 'waiting' | 'delayed' | 'active' | 'completed' | 'failed' | 'cancelled';
export const RUN_STATES: readonly RunState[] = ['waiting', 'delayed', 'active', 'completed', 'failed', 'cancelled'];
/** The final states, each with its workflow's finish index `wf:<name>:<state>`. */
const FINISHED_STATES = ['completed', 'failed', 'cancelled'] as const;

export type AuditRule =
  | 'run-record'
  | 'run-place'
  | 'orphan-member'
  | 'orphan-popped'
  | 'lease-without-active-run'
  | 'handoff'
  | 'active-count'
  | 'cap-exceeded'
  | 'group-index'
  | 'acknowledged'
  | 'stats'
  | 'schedule-index'
  | 'finish-index'
  | 'wait-record'
  | 'wait-index'
  | 'wait-child'
  | 'mailbox'
  | 'rate-review'
  | 'key-type';

/** The kinds of durable wait (lua/includes/waits.lua) and the index of each: `wf:<name>:<index>`. */
export type WaitKind = 'sleep' | 'signal' | 'event' | 'child';
export const WAIT_INDEX: Record<WaitKind, string> = {
  sleep: 'sleeping',
  signal: 'waiting-signal',
  event: 'waiting-event',
  child: 'waiting-child',
};
const WAIT_KINDS = Object.keys(WAIT_INDEX) as WaitKind[];
/** "No deadline" in a wait record and score in a wait index (NEVER in lua/includes/waits.lua, 2^52). */
export const NO_DEADLINE = 4503599627370496;

export interface Violation {
  rule: AuditRule;
  message: string;
  /** The run concerned, when there is one. */
  id?: string;
}

export interface AuditOptions {
  prefix?: string;
  namespace: string;
  /** Ids of every enqueue the test saw acknowledged: none may be missing, and no other run may exist. */
  acknowledged?: string[];
  /** Default true. See the `cap-exceeded` rule. */
  checkCaps?: boolean;
}

export interface GroupAudit {
  active: number;
  due: number;
  limit: number | null;
}

export interface WorkflowAudit {
  runs: Record<RunState, number>;
  /** SCARD of the workflow's active set. */
  active: number;
  delayed: number;
  /** Due runs in all its lanes (ungrouped and groups). */
  due: number;
  /** Fast-path handoffs waiting in its wake list. */
  handoffs: number;
  limit: number | null;
  groupLimit: number | null;
  groups: Record<string, GroupAudit>;
  /** Its running totals (wf:<name>:stats). */
  stats: { completed: number; failed: number };
  /** Its runs in a durable wait (state 'delayed' with a `wait`), by kind. */
  waits: Record<WaitKind, number>;
}

export interface AuditReport {
  prefix: string;
  namespace: string;
  /** Run records found. */
  runs: number;
  states: Record<RunState, number>;
  /** ZCARD leases. */
  leases: number;
  limits: Record<string, string>;
  workflows: Record<string, WorkflowAudit>;
  /** Keys of the namespace outside the key layout (e.g. a test's side-effect counters); not read. */
  unknownKeys: string[];
  /** The `orphans` list: '<workflow> <id>' entries a claim popped from a lane without a run record. */
  orphans: string[];
  /** Runs in a durable wait (state 'delayed' with a `wait`), by kind: a part of `states.delayed`. */
  waits: Record<WaitKind, number>;
  /** Runs whose timed wait came due (state 'waiting', the `wait` still recorded until their claim): a part of `states.waiting`. */
  dueWaits: number;
  violations: Violation[];
  ok: boolean;
}

interface RunRow {
  state: string | null;
  workflow: string | null;
  group: string;
  priority: number;
  token: string | null;
  createdAt: number | null;
  finishedAt: number | null;
  /** The durable wait record, '<kind> <deadline> <memo key> <target>' (lua/includes/waits.lua). */
  wait: string | null;
  waitLeft: string | null;
  /** A child run's '<parent id> <memo key>'. */
  parent: string | null;
  links: string | null;
}

interface ParsedWait {
  kind: WaitKind;
  deadline: number;
  memoKey: string;
  target: string;
}

/** A wait record as lua/includes/waits.lua parseWait reads it, or undefined if it does not parse. */
export function parseWaitRecord(record: string): ParsedWait | undefined {
  const match = /^(\S+) (\S+) (\S+) ?(.*)$/.exec(record);
  if (!match || !(WAIT_KINDS as string[]).includes(match[1]) || !/^\d+$/.test(match[2])) return undefined;
  return { kind: match[1] as WaitKind, deadline: Number(match[2]), memoKey: match[3], target: match[4] };
}

type Reader = { kind: 'run'; id: string } | { kind: 'layout'; key: string; read: 'list' | 'zset' | 'scored' | 'set' | 'hash' };

/** Reads and checks the namespace; never throws on a violation (see {@link expectConsistent}). */
export async function auditNamespace(redis: Redis, options: AuditOptions): Promise<AuditReport> {
  const prefix = options.prefix ?? 'sluice';
  const { namespace } = options;
  const base = `{${prefix}:${namespace}}:`;

  // 1. The keys, by SCAN (a test may: it is not on a hot path); on a cluster, every master's.
  const keys = await scanKeys(redis, `${globEscape(base)}*`);

  // 2. Every read in one MULTI: one consistent snapshot.
  const readers: Reader[] = [];
  const unknownKeys: string[] = [];
  for (const key of [...new Set(keys)].sort()) {
    const rest = key.slice(base.length);
    if (rest.startsWith('run:')) readers.push({ kind: 'run', id: rest.slice(4) });
    else {
      const read = layoutType(rest);
      if (read === 'string') continue; // seq, turn, stall-gate, schema, migrate-lock, call:<id>: nothing the audit has a rule for
      if (read) readers.push({ kind: 'layout', key: rest, read });
      else unknownKeys.push(key);
    }
  }
  // leases, limits and workflows are read even when absent (an empty reply).
  for (const [key, read] of [
    ['leases', 'zset'],
    ['limits', 'hash'],
    ['workflows', 'set'],
    ['orphans', 'list'],
  ] as const) {
    if (!readers.some((r) => r.kind === 'layout' && r.key === key)) readers.push({ kind: 'layout', key, read });
  }
  const multi = redis.multi();
  for (const reader of readers) {
    if (reader.kind === 'run')
      multi.hmget(
        `${base}run:${reader.id}`,
        'state',
        'workflow',
        'group',
        'priority',
        'token',
        'createdAt',
        'finishedAt',
        'wait',
        'waitLeft',
        'parent',
        'links',
      );
    else if (reader.read === 'list') multi.lrange(base + reader.key, 0, -1);
    else if (reader.read === 'zset') multi.zrange(base + reader.key, 0, -1);
    else if (reader.read === 'scored') multi.zrange(base + reader.key, 0, -1, 'WITHSCORES');
    else if (reader.read === 'set') multi.smembers(base + reader.key);
    else multi.hgetall(base + reader.key);
  }
  // The server's clock, in the same snapshot: a timed wait that came due did so by it.
  multi.time();
  const replies = (await multi.exec()) ?? [];
  const [timeError, time] = replies[readers.length] ?? [new Error('no reply to TIME'), null];
  if (timeError) throw timeError;
  const [seconds, micros] = time as [string, string];
  const redisNowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);

  const violations: Violation[] = [];
  const violate = (rule: AuditRule, message: string, id?: string) => violations.push({ rule, message, ...(id !== undefined && { id }) });

  const runs = new Map<string, RunRow>();
  const layout = new Map<string, unknown>();
  readers.forEach((reader, i) => {
    const [error, value] = replies[i];
    if (error) {
      violate('key-type', `${reader.kind === 'run' ? `run:${reader.id}` : reader.key}: ${error.message}`);
      return;
    }
    if (reader.kind === 'run') {
      const [state, workflow, group, priority, token, createdAt, finishedAt, wait, waitLeft, parent, links] = value as (string | null)[];
      // A key that expired between SCAN and MULTI reads as all-nil: it is gone, not broken.
      if (state === null && workflow === null && token === null) return;
      const num = (v: string | null) => (v === null ? null : Number(v));
      runs.set(reader.id, {
        state,
        workflow,
        group: group ?? '',
        priority: Number(priority ?? 0),
        token,
        createdAt: num(createdAt),
        finishedAt: num(finishedAt),
        wait,
        waitLeft,
        parent,
        links,
      });
    } else layout.set(reader.key, value);
  });
  const list = (key: string) => (layout.get(key) as string[] | undefined) ?? [];
  /** A zset read WITHSCORES ('scored'), as member → score (built once per key). */
  const scored = new Map<string, Map<string, number>>();
  const scores = (key: string) => {
    let map = scored.get(key);
    if (!map) {
      const flat = list(key);
      map = new Map<string, number>();
      for (let i = 0; i < flat.length; i += 2) map.set(flat[i], Number(flat[i + 1]));
      scored.set(key, map);
    }
    return map;
  };
  const hash = (key: string) => (layout.get(key) as Record<string, string> | undefined) ?? {};

  // 3. Workflows and groups: from the registry, the key names and the runs.
  const workflowNames = new Set<string>(list('workflows'));
  const groupsOf = new Map<string, Set<string>>();
  const noteGroup = (wf: string, group: string) => {
    workflowNames.add(wf);
    if (!groupsOf.has(wf)) groupsOf.set(wf, new Set());
    if (group) groupsOf.get(wf)!.add(group);
  };
  for (const key of layout.keys()) {
    const parsed = parseWorkflowKey(key);
    if (parsed) noteGroup(parsed.workflow, parsed.group ?? '');
  }
  for (const run of runs.values()) if (run.workflow) noteGroup(run.workflow, run.group);
  for (const wf of workflowNames) if (!groupsOf.has(wf)) groupsOf.set(wf, new Set());

  // 4. Where each id is.
  const places = new Map<string, string[]>();
  const put = (id: string, place: string) => places.set(id, [...(places.get(id) ?? []), place]);
  const leases = list('leases');
  leases.forEach((id) => put(id, 'leases'));
  const handoffs = new Map<string, { token: string; workflow: string }[]>();
  for (const wf of workflowNames) {
    for (const suffix of ['active', 'queue', 'waiting']) list(`wf:${wf}:${suffix}`).forEach((id) => put(id, `wf:${wf}:${suffix}`));
    for (const id of scores(`wf:${wf}:delayed`).keys()) put(id, `wf:${wf}:delayed`);
    for (const group of groupsOf.get(wf)!) {
      for (const suffix of ['queue', 'waiting', 'active'])
        list(`wf:${wf}:g:${group}:${suffix}`).forEach((id) => put(id, `wf:${wf}:g:${group}:${suffix}`));
    }
    for (const entry of list(`wf:${wf}:wake`)) {
      if (entry === '1') continue;
      const s1 = entry.indexOf(' ');
      const s2 = s1 < 0 ? -1 : entry.indexOf(' ', s1 + 1);
      if (s1 <= 0 || s2 <= s1 + 1) {
        violate('handoff', `wf:${wf}:wake holds a malformed entry ${JSON.stringify(entry.slice(0, 120))}`);
        continue;
      }
      const id = entry.slice(s1 + 1, s2);
      handoffs.set(id, [...(handoffs.get(id) ?? []), { token: entry.slice(0, s1), workflow: wf }]);
    }
  }

  // 5. Each run in exactly the places its state says.
  const states = Object.fromEntries(RUN_STATES.map((s) => [s, 0])) as Record<RunState, number>;
  const activeAt = new Map<string, Set<string>>(); // 'wf' or 'wf/group' -> active run ids
  const addActive = (level: string, id: string) => {
    if (!activeAt.has(level)) activeAt.set(level, new Set());
    activeAt.get(level)!.add(id);
  };
  const perWorkflowStates = new Map<string, Record<RunState, number>>();
  for (const [id, run] of runs) {
    if (!run.workflow || !RUN_STATES.includes(run.state as RunState)) {
      violate('run-record', `run ${id} has state ${JSON.stringify(run.state)} and workflow ${JSON.stringify(run.workflow)}`, id);
      continue;
    }
    const state = run.state as RunState;
    const wf = run.workflow;
    states[state]++;
    if (!perWorkflowStates.has(wf))
      perWorkflowStates.set(wf, Object.fromEntries(RUN_STATES.map((s) => [s, 0])) as Record<RunState, number>);
    perWorkflowStates.get(wf)![state]++;
    const lane = run.group ? `wf:${wf}:g:${run.group}:` : `wf:${wf}:`;
    const expected: string[] =
      state === 'waiting'
        ? [lane + (run.priority === 0 ? 'queue' : 'waiting')]
        : state === 'delayed'
          ? untimedWait(run)
            ? []
            : [`wf:${wf}:delayed`]
          : state === 'active'
            ? ['leases', `wf:${wf}:active`, ...(run.group ? [`${lane}active`] : [])]
            : [];
    const actual = [...(places.get(id) ?? [])].sort();
    if (actual.join('|') !== [...expected].sort().join('|')) {
      violate(
        'run-place',
        `run ${id} (${state}, workflow ${wf}${run.group ? `, group ${run.group}` : ''}, priority ${run.priority}) is in [${actual.join(', ')}], expected [${expected.join(', ')}]`,
        id,
      );
    }
    const handed = handoffs.get(id) ?? [];
    if (handed.length > 0) {
      if (state !== 'active') violate('handoff', `run ${id} (${state}) still has ${handed.length} handoff(s) in a wake list`, id);
      else if (handed.length > 1) violate('handoff', `run ${id} has ${handed.length} handoffs in wake lists`, id);
      else if (handed[0].token !== run.token || handed[0].workflow !== wf) {
        violate(
          'handoff',
          `run ${id}'s handoff in wf:${handed[0].workflow}:wake carries token ${handed[0].token}, the run holds ${run.token} (workflow ${wf})`,
          id,
        );
      }
    }
    if (state === 'active') {
      addActive(wf, id);
      if (run.group) addActive(`${wf}/${run.group}`, id);
    }
  }
  for (const [id, where] of places) {
    if (runs.has(id)) continue;
    for (const place of new Set(where)) {
      if (place === 'leases') violate('lease-without-active-run', `leases holds ${id}, which has no run record`, id);
      else violate('orphan-member', `${place} holds ${id}, which has no run record`, id);
    }
  }
  for (const id of leases) {
    const run = runs.get(id);
    if (run && run.state !== 'active') violate('lease-without-active-run', `leases holds ${id}, whose run is ${run.state}`, id);
  }
  for (const id of handoffs.keys()) if (!runs.has(id)) violate('handoff', `a wake list hands off ${id}, which has no run record`, id);
  const orphans = list('orphans');
  if (orphans.length)
    violate('orphan-popped', `the orphans list holds ${orphans.length} id(s) popped from a lane without a run record: [${clip(orphans)}]`);

  // 5b. Durable waits: each wait in its indexes, each index member in its wait, children counted.
  const waitReport = await auditWaits(redis, base, runs, workflowNames, layout, list, scores, redisNowMs, violate);

  // 6. Active counts at every level, and 7. caps.
  const limits = hash('limits');
  const capOf = (field: string) => (limits[field] === undefined ? null : Number(limits[field]));
  const groupCapOf = (wf: string, group: string) => capOf(`wf:${wf}:g:${group}`) ?? capOf(`wf:${wf}:group`);
  const checkCaps = options.checkCaps ?? true;
  const sameSet = (a: string[], b: Set<string>) => a.length === b.size && new Set(a).size === a.length && a.every((x) => b.has(x));
  const diff = (members: string[], runsActive: Set<string>) => {
    const extra = members.filter((id) => !runsActive.has(id));
    const missing = [...runsActive].filter((id) => !members.includes(id));
    return `${extra.length ? ` not active there: [${clip(extra)}]` : ''}${missing.length ? ` missing: [${clip(missing)}]` : ''}`;
  };
  let activeSetsTotal = 0;
  const workflows: Record<string, WorkflowAudit> = {};
  for (const wf of [...workflowNames].sort()) {
    const members = list(`wf:${wf}:active`);
    activeSetsTotal += members.length;
    const runsActive = activeAt.get(wf) ?? new Set<string>();
    if (!sameSet(members, runsActive))
      violate(
        'active-count',
        `wf:${wf}:active has ${members.length} member(s), ${runsActive.size} run(s) of ${wf} are active;${diff(members, runsActive)}`,
      );
    const limit = capOf(`wf:${wf}`);
    if (checkCaps && limit !== null && members.length > limit)
      violate('cap-exceeded', `workflow ${wf}: ${members.length} active > cap ${limit}`);

    const groups: Record<string, GroupAudit> = {};
    const ready = list(`wf:${wf}:ready`);
    const groupSet = list(`wf:${wf}:groups`);
    const busy: string[] = [];
    for (const group of [...groupsOf.get(wf)!].sort()) {
      const groupMembers = list(`wf:${wf}:g:${group}:active`);
      const groupRunsActive = activeAt.get(`${wf}/${group}`) ?? new Set<string>();
      if (!sameSet(groupMembers, groupRunsActive)) {
        violate(
          'active-count',
          `wf:${wf}:g:${group}:active has ${groupMembers.length} member(s), ${groupRunsActive.size} run(s) of ${wf}/${group} are active;${diff(groupMembers, groupRunsActive)}`,
        );
      }
      const groupLimit = groupCapOf(wf, group);
      if (checkCaps && groupLimit !== null && groupMembers.length > groupLimit)
        violate('cap-exceeded', `group ${wf}/${group}: ${groupMembers.length} active > cap ${groupLimit}`);
      const due = list(`wf:${wf}:g:${group}:queue`).length + list(`wf:${wf}:g:${group}:waiting`).length;
      // A paused group, or one its rate limit holds (in rate-held until its window frees), has no room.
      const held =
        limits[`wf:${wf}:g:${group}:paused`] !== undefined ||
        list(`wf:${wf}:rate-held`).includes(group) ||
        list(`wf:${wf}:rate-review`).includes(group);
      const room = !held && (groupLimit === null || groupMembers.length < groupLimit);
      const inReady = ready.includes(group);
      if (inReady && due === 0) violate('group-index', `group ${wf}/${group} is in wf:${wf}:ready with no due run`);
      if (due > 0 && room && !inReady)
        violate('group-index', `group ${wf}/${group} has ${due} due run(s) and room but is not in wf:${wf}:ready`);
      if (due > 0 || groupMembers.length > 0) busy.push(group);
      if (due > 0 || groupMembers.length > 0 || groupLimit !== null)
        groups[group] = { active: groupMembers.length, due, limit: groupLimit };
    }
    for (const group of ready)
      if (!groupsOf.get(wf)!.has(group)) violate('group-index', `wf:${wf}:ready holds ${group}, a group with no lane, active set or run`);
    if ([...groupSet].sort().join('|') !== busy.join('|'))
      violate(
        'group-index',
        `wf:${wf}:groups is [${[...groupSet].sort().join(', ')}], the groups with due or active runs are [${busy.join(', ')}]`,
      );

    if (list(`wf:${wf}:rate-review`).length > 0 && limits[`wf:${wf}:rate-review`] === undefined) {
      violate(
        'rate-review',
        `wf:${wf}:rate-review holds ${list(`wf:${wf}:rate-review`).length} group(s) but the limits hash has no wf:${wf}:rate-review flag`,
      );
    }
    if (list(`wf:${wf}:rate-held`).length > 0 && limits.controls === undefined) {
      violate(
        'rate-review',
        `wf:${wf}:rate-held holds ${list(`wf:${wf}:rate-held`).length} group(s) but no control is set (no reserve looks at it)`,
      );
    }
    const handoffCount = list(`wf:${wf}:wake`).filter((entry) => entry !== '1').length;
    const stats = hash(`wf:${wf}:stats`);
    const ungroupedDue = list(`wf:${wf}:queue`).length + list(`wf:${wf}:waiting`).length;
    workflows[wf] = {
      runs: perWorkflowStates.get(wf) ?? (Object.fromEntries(RUN_STATES.map((s) => [s, 0])) as Record<RunState, number>),
      active: members.length,
      delayed: scores(`wf:${wf}:delayed`).size,
      due: ungroupedDue + Object.values(groups).reduce((n, g) => n + g.due, 0),
      handoffs: handoffCount,
      limit,
      groupLimit: capOf(`wf:${wf}:group`),
      groups,
      stats: { completed: Number(stats.completed ?? 0), failed: Number(stats.failed ?? 0) },
      waits: waitReport.byWorkflow.get(wf) ?? noWaits(),
    };
  }
  const activeRuns = [...runs.values()].filter((r) => r.state === 'active').length;
  if (leases.length !== activeSetsTotal || leases.length !== activeRuns) {
    violate(
      'active-count',
      `ZCARD leases is ${leases.length}, the workflows' active sets hold ${activeSetsTotal}, ${activeRuns} run(s) are active`,
    );
  }
  const nsLimit = capOf('ns');
  if (checkCaps && nsLimit !== null && leases.length > nsLimit)
    violate('cap-exceeded', `namespace: ${leases.length} active > cap ${nsLimit}`);

  auditSchedules(layout, list, hash, violate);
  auditFinishIndexes(workflowNames, runs, list, violate, limits);

  // 8. Acknowledged enqueues: none lost, none extra; 9. running totals.
  if (options.acknowledged) {
    const acknowledged = new Set(options.acknowledged);
    const missing = [...acknowledged].filter((id) => !runs.has(id));
    if (missing.length) violate('acknowledged', `${missing.length} acknowledged run(s) do not exist: [${clip(missing)}]`);
    const counted = RUN_STATES.reduce((n, s) => n + states[s], 0);
    if (counted !== acknowledged.size) {
      const extra = [...runs.keys()].filter((id) => !acknowledged.has(id));
      violate(
        'acknowledged',
        `waiting ${states.waiting} + delayed ${states.delayed} + active ${states.active} + completed ${states.completed} + failed ${states.failed} + cancelled ${states.cancelled} = ${counted} ≠ ${acknowledged.size} acknowledged${extra.length ? `; not acknowledged: [${clip(extra)}]` : ''}`,
      );
    }
    for (const [wf, audit] of Object.entries(workflows)) {
      if (audit.stats.completed !== audit.runs.completed || audit.stats.failed !== audit.runs.failed) {
        violate(
          'stats',
          `wf:${wf}:stats counts completed ${audit.stats.completed} / failed ${audit.stats.failed}, the runs are completed ${audit.runs.completed} / failed ${audit.runs.failed}`,
        );
      }
    }
  }

  return {
    prefix,
    namespace,
    runs: runs.size,
    states,
    leases: leases.length,
    limits,
    workflows,
    unknownKeys,
    orphans,
    waits: waitReport.total,
    dueWaits: waitReport.due,
    violations,
    ok: violations.length === 0,
  };
}

/** Throws, listing every violation, unless the report has none. */
export function expectConsistent(report: AuditReport): void {
  if (report.ok) return;
  const lines = report.violations.map((v) => `  - [${v.rule}] ${v.message}`);
  throw new Error(
    `namespace {${report.prefix}:${report.namespace}} is inconsistent: ${report.violations.length} violation(s)\n${lines.join('\n')}\n` +
      `(runs: ${JSON.stringify(report.states)}, leases: ${report.leases})`,
  );
}

/**
 * Rule `finish-index`: each workflow's finish indexes (`wf:<name>:completed` / `:failed` /
 * `:cancelled`, score = finish order ≥ finish ms × 1024) against the runs. An entry without a run
 * is allowed (its hash expired or was trimmed; entries are dropped lazily), and so is one older
 * than its run's creation (the id was enqueued again after the hash expired). Any other entry
 * must point to a run of that workflow in that state, scored at or after its finish; and a
 * finished run must be in its index, unless it finished before the workflow's first index entry
 * (data from before the indexes existed), or it completed in a workflow that does not index
 * completed runs (no `wf:<name>:index-completed` in the limits hash).
 */
function auditFinishIndexes(
  workflowNames: Set<string>,
  runs: Map<string, RunRow>,
  list: (key: string) => string[],
  violate: (rule: AuditRule, message: string, id?: string) => void,
  limits: Record<string, string>,
): void {
  const indexes = new Map<string, Map<string, number>>();
  const firstScore = new Map<string, number>();
  for (const wf of workflowNames) {
    for (const state of FINISHED_STATES) {
      const key = `wf:${wf}:${state}`;
      const flat = list(key);
      const entries = new Map<string, number>();
      for (let i = 0; i < flat.length; i += 2) entries.set(flat[i], Number(flat[i + 1]));
      indexes.set(key, entries);
      for (const [id, score] of entries) {
        firstScore.set(wf, Math.min(firstScore.get(wf) ?? Infinity, score));
        const run = runs.get(id);
        if (!run || (run.createdAt !== null && run.createdAt * 1024 > score)) continue;
        if (run.workflow !== wf || run.state !== state)
          violate('finish-index', `${key} lists ${id}, which is ${run.state} (workflow ${run.workflow})`, id);
        else if (run.finishedAt !== null && score < run.finishedAt * 1024)
          violate('finish-index', `${key} scores ${id} ${score}, before its finish at ${run.finishedAt} ms`, id);
      }
    }
  }
  for (const [id, run] of runs) {
    if (!run.workflow || !(FINISHED_STATES as readonly string[]).includes(run.state ?? '')) continue;
    const key = `wf:${run.workflow}:${run.state}`;
    if (indexes.get(key)?.has(id)) continue;
    // Completed runs are indexed only where the workflow asks for it (indexCompleted, keep.completed).
    if (run.state === 'completed' && limits[`wf:${run.workflow}:index-completed`] === undefined) continue;
    const first = firstScore.get(run.workflow);
    if (first !== undefined && (run.finishedAt ?? 0) * 1024 >= first)
      violate('finish-index', `${run.state} run ${id} is missing from ${key}`, id);
  }
}

const noWaits = (): Record<WaitKind, number> => ({ sleep: 0, signal: 0, event: 0, child: 0 });

/** A run in a durable wait without a deadline: not in its workflow's delayed set (suspend.lua). */
function untimedWait(run: RunRow): boolean {
  const parsed = run.wait === null ? undefined : parseWaitRecord(run.wait);
  return parsed !== undefined && parsed.deadline >= NO_DEADLINE;
}

/**
 * Rules `wait-record`, `wait-index`, `wait-child` and `mailbox` (see the top of the file): the
 * durable waits of lua/includes/waits.lua against their indexes. Returns the waits counted.
 */
async function auditWaits(
  redis: Redis,
  base: string,
  runs: Map<string, RunRow>,
  workflowNames: Set<string>,
  layout: Map<string, unknown>,
  list: (key: string) => string[],
  scores: (key: string) => Map<string, number>,
  redisNowMs: number,
  violate: (rule: AuditRule, message: string, id?: string) => void,
): Promise<{ total: Record<WaitKind, number>; due: number; byWorkflow: Map<string, Record<WaitKind, number>> }> {
  const total = noWaits();
  const byWorkflow = new Map<string, Record<WaitKind, number>>();
  let due = 0;
  const finished = (state: string | null) => state === 'completed' || state === 'failed' || state === 'cancelled';
  const indexOf = (wf: string, kind: WaitKind) => scores(`wf:${wf}:${WAIT_INDEX[kind]}`);
  const eventSets = new Map<string, Set<string>>(); // target '<name>|<key>' → members
  const eventSetsOf = new Map<string, string[]>(); // run id → the targets of the event sets holding it
  for (const key of layout.keys()) {
    if (!key.startsWith('event:')) continue;
    const target = key.slice('event:'.length);
    eventSets.set(target, new Set(list(key)));
    for (const id of list(key)) eventSetsOf.set(id, [...(eventSetsOf.get(id) ?? []), target]);
  }
  const parsedOf = new Map<string, ParsedWait>();
  const childWaits: { id: string; wait: ParsedWait; record: string }[] = [];

  // Every run with a wait record: legal in its state, in exactly the indexes it says.
  for (const [id, run] of runs) {
    if (!run.workflow) continue;
    const wf = run.workflow;
    if (run.waitLeft !== null && (run.wait === null || !run.wait.startsWith('child '))) {
      violate(
        'wait-record',
        `run ${id} (${run.state}) has waitLeft ${run.waitLeft} but ${run.wait === null ? 'no wait' : `the wait ${JSON.stringify(run.wait)}`}`,
        id,
      );
    }
    if (run.wait === null) continue;
    const wait = parseWaitRecord(run.wait);
    if (!wait) {
      violate('wait-record', `run ${id} (${run.state}) has a malformed wait ${JSON.stringify(run.wait)}`, id);
      continue;
    }
    parsedOf.set(id, wait);
    const label = `run ${id} (${run.state}, ${wait.kind} wait of ${wf}, deadline ${wait.deadline >= NO_DEADLINE ? 'none' : wait.deadline})`;
    const delayedScore = scores(`wf:${wf}:delayed`).get(id);
    for (const kind of WAIT_KINDS) {
      const score = indexOf(wf, kind).get(id);
      if (kind !== wait.kind && score !== undefined) violate('wait-index', `${label} is also in wf:${wf}:${WAIT_INDEX[kind]}`, id);
    }
    const score = indexOf(wf, wait.kind).get(id);
    const inEventSets = eventSetsOf.get(id) ?? [];
    if (run.state === 'delayed') {
      total[wait.kind]++;
      if (!byWorkflow.has(wf)) byWorkflow.set(wf, noWaits());
      byWorkflow.get(wf)![wait.kind]++;
      if (score !== wait.deadline)
        violate(
          'wait-index',
          `${label} is ${score === undefined ? 'missing from' : `scored ${score} in`} wf:${wf}:${WAIT_INDEX[wait.kind]}`,
          id,
        );
      // run-place checks the membership of `delayed`, this its score.
      if (wait.deadline < NO_DEADLINE && delayedScore !== undefined && delayedScore !== wait.deadline) {
        violate('wait-index', `${label} is scored ${delayedScore} in wf:${wf}:delayed`, id);
      }
      if (wait.kind === 'event' && !inEventSets.includes(wait.target))
        violate('wait-index', `${label} is missing from event:${wait.target}`, id);
      if (wait.kind === 'child') {
        childWaits.push({ id, wait, record: run.wait });
        if (wait.deadline < NO_DEADLINE) violate('wait-record', `${label}: a child wait has no deadline`, id);
      }
      if (wait.kind !== 'child' && wait.target === '' && wait.kind !== 'sleep') violate('wait-record', `${label} has no target`, id);
    } else if (run.state === 'waiting') {
      // Came due by its deadline, promoted out of `delayed` with its wait left recorded (f42eab8's
      // reserve did; today's ends the wait as it promotes): its claim ends the wait.
      due++;
      if (wait.deadline >= NO_DEADLINE || wait.deadline > redisNowMs) {
        violate(
          'wait-record',
          `${label} is due although its deadline ${wait.deadline >= NO_DEADLINE ? 'is none' : `is ${wait.deadline - redisNowMs} ms ahead`}`,
          id,
        );
      }
      if (score !== wait.deadline)
        violate(
          'wait-index',
          `${label}: a wait that came due stays in wf:${wf}:${WAIT_INDEX[wait.kind]} at its deadline until its claim, found ${score === undefined ? 'none' : `score ${score}`}`,
          id,
        );
    } else {
      violate('wait-record', `${label}: a wait recorded on a run that is ${run.state}`, id);
    }
    const strayEvents = inEventSets.filter((target) => wait.kind !== 'event' || target !== wait.target);
    if (strayEvents.length) violate('wait-index', `${label} is in event set(s) [${clip(strayEvents.map((t) => `event:${t}`))}]`, id);
  }

  // Every index member: a run in that wait.
  for (const wf of workflowNames) {
    for (const kind of WAIT_KINDS) {
      for (const [id, score] of indexOf(wf, kind)) {
        const run = runs.get(id);
        const wait = parsedOf.get(id);
        if (!run) violate('wait-index', `wf:${wf}:${WAIT_INDEX[kind]} holds ${id}, which has no run record`, id);
        else if (run.workflow !== wf || !wait || wait.kind !== kind) {
          violate(
            'wait-index',
            `wf:${wf}:${WAIT_INDEX[kind]} holds ${id} (score ${score}), a ${run.state} run of ${run.workflow} ${wait ? `in a ${wait.kind} wait` : 'in no wait'}`,
            id,
          );
        }
      }
    }
  }
  for (const [target, members] of eventSets) {
    for (const id of members) {
      const run = runs.get(id);
      const wait = parsedOf.get(id);
      if (!run) violate('wait-index', `event:${target} holds ${id}, which has no run record`, id);
      else if (!wait || wait.kind !== 'event' || wait.target !== target) {
        violate(
          'wait-index',
          `event:${target} holds ${id}, a ${run.state} run ${wait ? `in a ${wait.kind} wait for ${JSON.stringify(wait.target)}` : 'in no wait'}`,
          id,
        );
      }
    }
  }

  // Mailboxes: only of unfinished, linked runs.
  for (const key of layout.keys()) {
    if (!key.startsWith('mailbox:')) continue;
    const id = key.slice('mailbox:'.length);
    const run = runs.get(id);
    if (!run) violate('mailbox', `${key} belongs to no run record`, id);
    else if (finished(run.state)) violate('mailbox', `${key} outlived its run (${run.state})`, id);
    else if (run.links !== '1') violate('mailbox', `${key}: its run has no links field (its finish would not drop it)`, id);
    for (const entry of list(key))
      if (!/^\S+ \S/.test(entry)) violate('mailbox', `${key} holds a malformed entry ${JSON.stringify(entry.slice(0, 120))}`, id);
  }

  // Child waits: waitLeft = the listed children whose outcome is not in the memo yet. The memo
  // fields are known only now: read with the wait again, in a second MULTI.
  if (childWaits.length > 0) {
    const plans = childWaits.map(({ id, wait, record }) => {
      const children = wait.target
        .split(' ')
        .filter(Boolean)
        .map((child) => {
          const row = runs.get(child);
          const ref = row?.parent ?? null;
          // The memo key: from the child's link to this parent, else from a default child id '<parent id>/<memo key>'.
          const key =
            ref !== null && ref.startsWith(`${id} `)
              ? ref.slice(id.length + 1)
              : child.startsWith(`${id}/`)
                ? child.slice(id.length + 1)
                : undefined;
          return { child, row, key };
        });
      return { id, wait, record, children };
    });
    const multi = redis.multi();
    for (const plan of plans) {
      const fields = plan.children.flatMap(({ key }) => (key === undefined ? [] : [`step:${key}`]));
      multi.hmget(`${base}run:${plan.id}`, 'wait', 'waitLeft', ...fields);
    }
    const replies = (await multi.exec()) ?? [];
    plans.forEach((plan, i) => {
      const [error, value] = replies[i];
      if (error) return violate('key-type', `run:${plan.id}: ${error.message}`, plan.id);
      const [wait, waitLeft, ...memo] = value as (string | null)[];
      if (wait !== plan.record) return; // the wait moved on between the two reads: not at rest
      let m = 0;
      let outstanding = 0;
      let unknown = 0;
      for (const { child, row, key } of plan.children) {
        const outcome = key === undefined ? undefined : memo[m++];
        const where = `run ${plan.id}'s child ${child}`;
        if (key === undefined) {
          // Neither linked to this parent nor named after it (an id given to invoke). Fine if it had
          // finished before the wait began (suspend.lua recorded its outcome then, without a link);
          // with no record left, whether its outcome is in cannot be told.
          if (!row) unknown++;
          else if (!finished(row.state) || row.parent !== null) {
            violate('wait-child', `${where} is ${row.state}, linked to ${JSON.stringify(row.parent)}, not to this parent`, plan.id);
          }
          continue;
        }
        if (outcome !== null) continue; // its outcome is in: done, whatever became of its record
        outstanding++;
        if (!row)
          violate(
            'wait-child',
            `${where} has no run record and its outcome (step:${key}) is not in the memo: the parent waits forever`,
            plan.id,
          );
        else if (finished(row.state))
          violate('wait-child', `${where} is ${row.state} but its outcome (step:${key}) is not in the memo`, plan.id);
        else if (row.parent !== `${plan.id} ${key}`)
          violate('wait-child', `${where} is linked to ${JSON.stringify(row.parent)}, expected "${plan.id} ${key}"`, plan.id);
        else if (row.links !== '1') violate('wait-child', `${where} has no links field: its finish would not resume the parent`, plan.id);
      }
      const left = waitLeft === null ? NaN : Number(waitLeft);
      if (!(left >= outstanding && left <= outstanding + unknown) || left < 1) {
        violate(
          'wait-child',
          `run ${plan.id} waits for ${plan.children.length} child(ren) with waitLeft ${waitLeft}; ${outstanding} have no outcome in the memo${unknown ? `, ${unknown} unknown (no record)` : ''}`,
          plan.id,
        );
      }
    });
  }
  return { total, due, byWorkflow };
}

/** Rule `schedule-index`: the derived schedule keys against the schedule hashes. */
function auditSchedules(
  layout: Map<string, unknown>,
  list: (key: string) => string[],
  hash: (key: string) => Record<string, string>,
  violate: (rule: AuditRule, message: string, id?: string) => void,
): void {
  const indexOf = (workflow: string) => {
    const flat = list(`wf:${workflow}:next-fires`);
    return new Map(flat.flatMap((member, i) => (i % 2 === 0 ? [[member, flat[i + 1]] as const] : [])));
  };
  const all = new Set(list('schedules'));
  for (const key of layout.keys()) {
    if (key.startsWith('schedule:')) {
      const id = key.slice('schedule:'.length);
      const h = hash(key);
      if (!h.workflow) {
        violate('schedule-index', `${key} has no workflow`, id);
        continue;
      }
      if (!all.has(id)) violate('schedule-index', `schedule ${id} is missing from schedules`, id);
      if (!list(`wf:${h.workflow}:schedules`).includes(id))
        violate('schedule-index', `schedule ${id} is missing from wf:${h.workflow}:schedules`, id);
      const score = indexOf(h.workflow).get(id);
      if (h.paused === '1' && score !== undefined) violate('schedule-index', `paused schedule ${id} is in wf:${h.workflow}:next-fires`, id);
      if (h.paused !== '1' && score !== h.next)
        violate('schedule-index', `schedule ${id}: next ${h.next}, index score ${score ?? 'none'}`, id);
    }
    const derived = /^wf:([^:]+):(schedules|next-fires)$/.exec(key);
    if (derived) {
      const members = derived[2] === 'next-fires' ? [...indexOf(derived[1]).keys()] : list(key);
      for (const id of members)
        if (hash(`schedule:${id}`).workflow !== derived[1])
          violate('schedule-index', `${key} lists ${id}, which is no schedule of ${derived[1]}`, id);
    }
  }
  for (const id of all) if (!hash(`schedule:${id}`).workflow) violate('schedule-index', `schedules lists ${id}, which has no hash`, id);
}

/** The reader for a key of the layout (after the hash tag), or undefined for a key outside it. */
function layoutType(rest: string): 'list' | 'zset' | 'scored' | 'set' | 'hash' | 'string' | undefined {
  if (
    rest === 'seq' ||
    rest === 'turn' ||
    rest === 'stall-gate' ||
    rest === 'schema' ||
    rest === 'migrate-lock' ||
    rest.startsWith('call:')
  )
    return 'string';
  if (rest.startsWith('schedule:')) return 'hash';
  if (rest.startsWith('event:')) return 'set';
  if (rest.startsWith('mailbox:') || rest.startsWith('cascade:')) return 'list';
  if (rest === 'cascades') return 'zset';
  if (rest === 'schedules') return 'zset';
  if (rest === 'leases') return 'zset';
  if (rest === 'orphans') return 'list';
  if (rest === 'ns-waiting') return 'zset';
  if (rest === 'limits') return 'hash';
  if (rest === 'workflows') return 'set';
  const parsed = parseWorkflowKey(rest);
  if (!parsed) return undefined;
  const { suffix, group } = parsed;
  if (group !== undefined) return suffix === 'queue' ? 'list' : suffix === 'waiting' ? 'zset' : suffix === 'active' ? 'set' : undefined;
  switch (suffix) {
    case 'queue':
    case 'wake':
      return 'list';
    case 'waiting':
    case 'ready':
    case 'parked':
    case 'rate-held':
    case 'rate-review':
      return 'zset';
    case 'delayed':
    case 'sleeping':
    case 'waiting-signal':
    case 'waiting-event':
    case 'waiting-child':
      return 'scored';
    case 'schedules':
      return 'zset';
    case 'next-fires':
    case 'completed':
    case 'failed':
    case 'cancelled':
      return 'scored';
    case 'sweep':
      return 'string';
    case 'active':
    case 'groups':
    case 'declared':
      return 'set';
    case 'stats':
      return 'hash';
    default:
      return undefined;
  }
}

/** `wf:<name>:<suffix>` or `wf:<name>:g:<group>:<suffix>` (names and groups contain no ':'). */
function parseWorkflowKey(rest: string): { workflow: string; group?: string; suffix: string } | undefined {
  const parts = rest.split(':');
  if (parts[0] !== 'wf') return undefined;
  if (parts.length === 3) return { workflow: parts[1], suffix: parts[2] };
  if (parts.length === 5 && parts[2] === 'g') return { workflow: parts[1], group: parts[3], suffix: parts[4] };
  return undefined;
}

function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

function clip(ids: string[], max = 20): string {
  return ids.length > max ? `${ids.slice(0, max).join(', ')}, … ${ids.length - max} more` : ids.join(', ');
}
