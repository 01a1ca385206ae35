import type { QueueStats, WorkflowStats } from '../../interfaces/queue.stats';
import { toRateLimit } from '../../interfaces/rate-limit';
import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';

/** One stats snapshot (lua/stats.lua). */
export interface StatsRequest {
  /** The workflows to count; empty for every registered workflow. */
  workflows: string[];
  /** Include the rows of groups with due or active runs (at most MAX_GROUP_ROWS a workflow). */
  groups: boolean;
}

/** Reads the counts and caps in one call (a read: repeating it is harmless). */
export async function readStats(scripts: LuaScripts, keys: RedisKeys, request: StatsRequest): Promise<QueueStats> {
  const reply = await scripts.run<unknown[]>(
    'stats',
    [keys.leases, keys.limits],
    [keys.base, request.groups ? 1 : 0, ...request.workflows],
    { idempotent: true },
  );
  return parseStats(reply, request.groups);
}

/** A cap as the reply gives it: '' for none. */
type Cap = number | string;
type GroupRow = [string, number, number, Cap, number, Cap, Cap, string];
type WorkflowRow = [
  string,
  number,
  number,
  number,
  Cap,
  Cap,
  number,
  number,
  GroupRow[],
  number,
  number,
  Cap,
  Cap,
  Cap,
  Cap,
  number,
  number,
  number,
  number,
  number,
];

const cap = (value: Cap): number | null => (value === '' ? null : Number(value));

/** Parses the stats script's reply (see lua/stats.lua); the group rows only `withGroups`. */
function parseStats(reply: unknown[], withGroups: boolean): QueueStats {
  const [active, limit, ...rows] = reply as [number, Cap, ...WorkflowRow[]];
  const workflows: Record<string, WorkflowStats> = {};
  for (const [
    name,
    waiting,
    delayed,
    running,
    wfLimit,
    groupLimit,
    completed,
    failed,
    groupRows,
    omitted,
    paused,
    rate,
    rateMs,
    groupRate,
    groupRateMs,
    cancelled,
    sleeping,
    waitingSignal,
    waitingEvent,
    waitingChild,
  ] of rows) {
    workflows[name] = {
      waiting,
      delayed,
      sleeping,
      waitingSignal,
      waitingEvent,
      waitingChild,
      active: running,
      limit: cap(wfLimit),
      groupLimit: cap(groupLimit),
      completed,
      failed,
      cancelled,
      paused: paused === 1,
      rateLimit: toRateLimit(rate, rateMs),
      groupRateLimit: toRateLimit(groupRate, groupRateMs),
      ...(withGroups && {
        groups: Object.fromEntries(
          groupRows.map(([group, gWaiting, gActive, gLimit, gPaused, gRate, gRateMs, heldUntil]) => [
            group,
            {
              waiting: gWaiting,
              active: gActive,
              limit: cap(gLimit),
              paused: gPaused === 1,
              rateLimit: toRateLimit(gRate, gRateMs),
              ...(heldUntil !== '' && { rateHeldUntil: new Date(Number(heldUntil)) }),
            },
          ]),
        ),
      }),
      ...(withGroups && omitted > 0 && { groupsOmitted: omitted }),
    };
  }
  return { namespace: { active, limit: cap(limit) }, workflows };
}
