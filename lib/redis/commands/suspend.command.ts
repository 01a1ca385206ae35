import type { LuaScripts } from '../lua.scripts';
import type { CallOptions } from '../redis.link';
import type { RedisKeys } from '../redis.keys';
import type { LeaseRef } from './save-steps.command';

/** A child run a wait of kind 'child' creates (unless its id exists), due now and linked to its parent. */
export interface SuspendChild {
  id: string;
  workflow: string;
  /** Encoded. */
  input: string;
  /** Its max attempts. */
  attempts: number;
  group: string | undefined;
  priority: number;
  /** Whether the script must register the workflow in the namespace: the calling worker does not declare it. */
  register: boolean;
}

/** One suspend call (lua/suspend.lua): a durable wait, committed only while `claim` still holds its lease. */
export interface SuspendCall {
  claim: LeaseRef;
  kind: 'sleep' | 'signal' | 'event' | 'child';
  /** Deadline from now (Redis time), in ms. */
  afterMs?: number;
  /** Deadline in ms since the epoch (wins over afterMs). */
  atMs?: number;
  /** Signal name, '<event name>|<key>', or '' (sleep, child). */
  target: string;
  /** Bytes the memo may still take: the position entries count first, then the wait's outcomes. */
  room: number;
  /** The attempt's journal '<slot> <json>', or '' (AttemptJournal.encode), stored if the run suspends. */
  journal: string;
  /** The attempt's calls up to this wait that the memo does not hold yet: field '@<p>', value '<kind>:<name>#<n>'. */
  positions: Array<{ field: string; value: string }>;
  /** One per memo key '<name>#<n>' the wait fills (several for invokeAll), with its child for kind 'child'. */
  entries: Array<{ key: string; child?: SuspendChild }>;
}

/**
 * What a suspend call did: the run suspended (lease and slots given up); the wait ended at once
 * (`resumed`: its outcomes by memo key; the lease holds); or nothing was written — the lease was
 * gone (`lost`), a child's id belongs to another parent or to the run's own line (`conflict`),
 * a child's workflow no worker registered (`unknown`), or the position entries, `bytes` of them,
 * would take the memo past its budget (`over`; `key` is the wait's memo key).
 */
export type SuspendOutcome =
  | { outcome: 'suspended' }
  | { outcome: 'resumed'; resumed: Map<string, string> }
  | { outcome: 'lost' }
  | { outcome: 'conflict'; childId: string }
  | { outcome: 'unknown'; workflow: string }
  | { outcome: 'over'; key: string; bytes: number };

/**
 * Commits a wait. `policy`: the worker's commitPolicy (the script recognises its own earlier
 * landing by token, so a retry answers what that call did).
 */
export async function suspend(scripts: LuaScripts, keys: RedisKeys, call: SuspendCall, policy: CallOptions): Promise<SuspendOutcome> {
  const { claim } = call;
  const entries = call.entries.flatMap(({ key, child }) => {
    const entry: (string | number)[] = [key];
    if (child) entry.push(child.id, child.workflow, child.input, child.attempts, child.group ?? '', child.priority, child.register ? 1 : 0);
    return entry;
  });
  const args = [
    keys.base,
    claim.id,
    claim.token,
    call.kind,
    call.afterMs ?? '',
    call.atMs ?? '',
    call.target,
    call.room,
    call.journal,
    call.positions.length,
    ...call.positions.flatMap(({ field, value }) => [field, value]),
    call.entries.length,
    ...entries,
  ];
  const reply = await scripts.run<[string, unknown, unknown?]>(
    'suspend',
    [keys.run(claim.id), keys.leases, keys.limits, keys.seq],
    args,
    policy,
  );
  return parseSuspendReply(reply);
}

function parseSuspendReply(reply: [string, unknown, unknown?]): SuspendOutcome {
  switch (reply[0]) {
    case 'suspended':
      return { outcome: 'suspended' };
    case 'resumed': {
      const flat = reply[1] as string[];
      const resumed = new Map<string, string>();
      for (let i = 0; i < flat.length; i += 2) resumed.set(flat[i], flat[i + 1]);
      return { outcome: 'resumed', resumed };
    }
    case 'over':
      return { outcome: 'over', key: String(reply[1]), bytes: Number(reply[2]) };
    case 'conflict':
      return { outcome: 'conflict', childId: String(reply[1]) };
    case 'unknown':
      return { outcome: 'unknown', workflow: String(reply[1]) };
    default:
      return { outcome: 'lost' };
  }
}
