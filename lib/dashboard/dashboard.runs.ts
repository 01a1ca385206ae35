import { QueueClient } from '../client/queue.client';
import type { ListableState } from '../client/run.admin';
import type { RunInfo } from '../client/run-info';
import { InvalidOptionError } from '../errors';
import { inputPreview } from './payload.display';

/** Characters of a run's input shown in a list (the run page shows all of it). */
const INPUT_PREVIEW = 300;

/** Every state a run can be listed in, as the runs page offers them ('all' merges them). */
export const RUN_STATES: readonly ListableState[] = [
  'waiting',
  'delayed',
  'active',
  'sleeping',
  'waiting-signal',
  'waiting-event',
  'waiting-child',
  'completed',
  'failed',
  'cancelled',
];

export interface RunSummary extends Omit<RunInfo, 'input' | 'result' | 'progress' | 'error' | 'waitingFor'> {
  input: string;
  error?: { name: string; message: string };
}

export interface RunsQuery {
  workflow: string;
  /** One state, or 'all'. */
  state: string;
  group?: string;
  /** Only the runs enqueued with this dedupe key (`ListRunsOptions.dedupeKey`). */
  dedupeKey?: string;
  cursor?: string;
  limit: number;
  order: 'asc' | 'desc';
}

export interface RunsView {
  runs: RunSummary[];
  cursor: string | null;
  /** Completed runs are not indexed for this workflow: the list shows none (see CompletedWatch). */
  completedUnlisted?: boolean;
}

/** A per-state cursor of an 'all' page: '' = from the start; a state absent from it is exhausted. */
type Cursors = Partial<Record<ListableState, string>>;

/**
 * The runs page's lists, through `QueueClient.listRuns`: one state, or every state merged by
 * activity time (finished, else started when active, else due), newest first by default. An
 * 'all' page reads one page of each state and keeps the `limit` newest; a state whose rows were
 * only partly shown gets its cursor from a second read of exactly those rows, so paging shows
 * every run once while nothing moves. Active runs are unordered (an SSCAN): a page shows its
 * active rows whole. Cost: one script call per state per page, plus one per partly shown state.
 */
export class RunLister {
  constructor(private readonly client: QueueClient) {}

  async list(query: RunsQuery): Promise<RunsView> {
    if (query.state !== 'all') {
      if (!RUN_STATES.includes(query.state as ListableState))
        throw new InvalidOptionError('state', `must be 'all' or one of ${RUN_STATES.join(', ')}`);
      const page = await this.page(query, query.state as ListableState, query.cursor, query.limit);
      if (!page) return { runs: [], cursor: null, completedUnlisted: true };
      return { runs: page.runs.map(summarize), cursor: page.cursor };
    }
    const cursors = query.cursor ? decodeCursors(query.cursor) : (Object.fromEntries(RUN_STATES.map((state) => [state, ''])) as Cursors);
    const states = RUN_STATES.filter((state) => cursors[state] !== undefined);
    const pages = await Promise.all(states.map((state) => this.page(query, state, cursors[state] || undefined, query.limit)));
    let completedUnlisted = false;
    const streams = states.map((state, i) => {
      if (!pages[i]) completedUnlisted = true;
      return (pages[i]?.runs ?? []).map((run) => ({ state, run, at: activityAt(run) }));
    });
    const shown = merge(streams, query.order, query.limit);
    // Active rows come whole (their page is an SSCAN's, not ordered): all of them or none.
    const active = streams[states.indexOf('active')] ?? [];
    if (shown.some((row) => row.state === 'active')) for (const row of active) if (!shown.includes(row)) shown.push(row);
    const next: Cursors = {};
    await Promise.all(
      states.map(async (state, i) => {
        const page = pages[i];
        if (!page) return;
        const fetched = page.runs.length;
        const used = shown.filter((row) => row.state === state).length;
        if (used === fetched) {
          if (page.cursor !== null) next[state] = page.cursor;
        } else if (used === 0) {
          next[state] = cursors[state] ?? '';
        } else {
          const exact = await this.page(query, state, cursors[state] || undefined, used);
          if (exact?.cursor) next[state] = exact.cursor;
        }
      }),
    );
    if (shown.length > query.limit) shown.sort((a, b) => sign(query.order) * (a.at - b.at));
    return {
      runs: shown.map((row) => summarize(row.run)),
      cursor: Object.keys(next).length ? encodeCursors(next) : null,
      ...(completedUnlisted ? { completedUnlisted: true } : {}),
    };
  }

  /**
   * The members of batch run `batch` (docs/batches.md), in enqueue order, `limit` a page from
   * `cursor` (an offset): one read of the member list, then one per member shown.
   */
  async byBatch(batch: string, cursor: string | undefined, limit: number): Promise<RunsView> {
    const from = cursor === undefined ? 0 : Number(cursor);
    if (!Number.isInteger(from) || from < 0) throw new InvalidOptionError('cursor', 'must be a cursor from a previous page of this list');
    const ids = (await this.client.batchMembers(batch)) ?? [];
    const page = ids.slice(from, from + limit);
    const runs = (await Promise.all(page.map((id) => this.client.get(id)))).filter((run): run is RunInfo => run !== null);
    return { runs: runs.map(summarize), cursor: from + limit < ids.length ? String(from + limit) : null };
  }

  /** One run found by its exact id (any workflow), as a one-row list. */
  async byId(id: string): Promise<RunsView> {
    const run = await this.client.get(id);
    return { runs: run ? [summarize(run)] : [], cursor: null };
  }

  /** A page of one state; undefined for 'completed' of a workflow whose completed runs are not indexed. */
  private async page(query: RunsQuery, state: ListableState, cursor: string | undefined, limit: number) {
    try {
      const { workflow, group, dedupeKey, order } = query;
      return await this.client.listRuns({ workflow, state, group, dedupeKey, cursor, limit, order });
    } catch (error) {
      if (state === 'completed' && error instanceof InvalidOptionError && /not indexed/.test(error.message)) return undefined;
      throw error;
    }
  }
}

const sign = (order: 'asc' | 'desc') => (order === 'desc' ? -1 : 1);

/**
 * The first `limit` rows of the states' pages merged by activity time. Each state's rows stay in
 * their page's order (ties go to the earlier state), so what is shown of a state is a prefix of
 * its page: the rest is where its next page starts.
 */
function merge<T extends { at: number }>(streams: T[][], order: 'asc' | 'desc', limit: number): T[] {
  const heads = streams.map(() => 0);
  const out: T[] = [];
  while (out.length < limit) {
    let best = -1;
    streams.forEach((stream, i) => {
      const row = stream[heads[i]];
      if (row && (best < 0 || sign(order) * (row.at - streams[best][heads[best]].at) < 0)) best = i;
    });
    if (best < 0) break;
    out.push(streams[best][heads[best]++]);
  }
  return out;
}

/** The time a run's state is ordered by: when it finished, else started (active), else is due. */
function activityAt(run: RunInfo): number {
  const at = run.finishedAt ?? (run.state === 'active' ? run.startedAt : undefined) ?? run.dueAt ?? run.createdAt;
  return at ? at.getTime() : 0;
}

function encodeCursors(cursors: Cursors): string {
  return Buffer.from(JSON.stringify(cursors)).toString('base64url');
}

function decodeCursors(text: string): Cursors {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const valid =
    parsed !== null &&
    typeof parsed === 'object' &&
    !Array.isArray(parsed) &&
    Object.entries(parsed).every(([state, cursor]) => RUN_STATES.includes(state as ListableState) && typeof cursor === 'string');
  if (!valid) throw new InvalidOptionError('cursor', 'must be a cursor from a previous page of this list');
  return parsed as Cursors;
}

export function summarize(run: RunInfo): RunSummary {
  const { input, result: _result, progress: _progress, error, waitingFor: _waitingFor, ...rest } = run;
  const text = inputPreview(input);
  return {
    ...rest,
    input: text.length > INPUT_PREVIEW ? `${text.slice(0, INPUT_PREVIEW)}…` : text,
    ...(error && { error: { name: error.name, message: error.message } }),
  };
}
