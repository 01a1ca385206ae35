import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** The states whose index lua/list-runs.lua pages (`ListableState`). */
export type IndexedState =
  | 'completed'
  | 'failed'
  | 'cancelled'
  | 'delayed'
  | 'waiting'
  | 'active'
  | 'sleeping'
  | 'waiting-signal'
  | 'waiting-event'
  | 'waiting-child';

/** One page of a workflow's runs in one state (lua/list-runs.lua), checked by the caller. */
export interface ListRunsRequest {
  workflow: string;
  state: IndexedState;
  /** Only this group's runs; '' for every group. */
  group: string;
  /** Only runs enqueued with this dedupe key; '' for every run. */
  dedupeKey: string;
  /** The previous page's cursor, or '' to start. */
  cursor: string;
  /** Runs per page (1..1000). */
  limit: number;
  order: 'asc' | 'desc';
  /** The run fields each row replies, in order; among them 'state', 'group' and 'dedupeKey' ('wait' too for the delayed and wait states). */
  fields: readonly string[];
}

/** One page of runs, their fields raw. */
export interface RunRows {
  /** Per run: its id and its values of the request's `fields` (null: not stored). */
  rows: Array<{ id: string; values: (string | null)[] }>;
  /** The next page's cursor; null after the last page. */
  next: string | null;
}

/**
 * Reads one page of runs from the index that holds their state (a read: repeating it is
 * harmless).
 * @returns null for 'completed' of a workflow whose completed runs are not indexed (and never were)
 */
export async function listRuns(scripts: LuaScripts, keys: RedisKeys, request: ListRunsRequest): Promise<RunRows | null> {
  const { kind, index } = indexOf(keys, request);
  // The lane or the active set is the group's own: no filter needed there.
  const filter = kind === 'finished' || kind === 'delayed' ? request.group : '';
  // Runs in a durable wait are stored as 'delayed' (see lua/includes/waits.lua).
  const stored = kind === 'delayed' ? 'delayed' : request.state;
  const [next, ...rows] = await scripts.run<[string | null, ...(string | null)[][]]>(
    'list-runs',
    index,
    [keys.base, kind, stored, request.cursor, request.limit, request.order, filter, request.dedupeKey, ...request.fields],
    { idempotent: true },
  );
  if (next === null) return null;
  return { rows: rows.map(([id, ...values]) => ({ id: id as string, values })), next: next === '' ? null : next };
}

/** The script's kind of index for a state, and its KEYS[1..2] (KEYS[2] is KEYS[1] again where unused). */
function indexOf(
  keys: RedisKeys,
  request: ListRunsRequest,
): { kind: 'finished' | 'delayed' | 'waiting' | 'active'; index: [string, string] } {
  const { workflow, state } = request;
  const group = request.group || undefined;
  const one = (key: string): [string, string] => [key, key];
  switch (state) {
    case 'completed':
    case 'failed':
    case 'cancelled':
      return { kind: 'finished', index: one(keys.finished(workflow, state)) };
    case 'waiting':
      return { kind: 'waiting', index: [keys.lane(workflow, group, 'waiting'), keys.lane(workflow, group, 'queue')] };
    case 'active':
      return { kind: 'active', index: one(group ? keys.lane(workflow, group, 'active') : keys.workflow(workflow, 'active')) };
    default:
      // A durable wait's index is paged as the delayed set is, by deadline (no deadline: last).
      return { kind: 'delayed', index: one(keys.workflow(workflow, state)) };
  }
}
