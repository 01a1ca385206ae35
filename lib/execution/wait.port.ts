import type { InvokeOptions } from '../workflow/wait.types';
import type { AttemptJournal } from './attempt.journal';
import type { Placed } from './step.recorder';

/** A child run as a wait's commit enqueues it: its enqueue, checked as `QueueClient.enqueue` checks one. */
export interface ChildRequest {
  id: string;
  workflow: string;
  /** Encoded. */
  input: string;
  priority: number;
  attempts: number;
  group: string | undefined;
  /** Set when the child's input schema validates asynchronously: the wait commits once it resolves. */
  checking?: Promise<unknown>;
}

/** A wait as lua/suspend.lua takes it. */
export interface SuspendRequest {
  kind: 'sleep' | 'signal' | 'event' | 'child';
  /** Deadline from now (Redis time), in ms. */
  afterMs?: number;
  /** Deadline in ms since the epoch (wins over afterMs). */
  atMs?: number;
  target: string;
  entries: Array<{ placed: Placed; child?: ChildRequest }>;
}

/**
 * What the commit of a wait answered: it ended at once (its outcomes by memo key), the run
 * suspended, or the position entries it had to write (`bytes` of them) would take the memo past
 * its budget (nothing written; `key` is the wait's memo key).
 */
export type SuspendReply = { resumed: Map<string, string> } | 'suspended' | { over: { key: string; bytes: number } };

/** Where a wait commits: the token-checked script in a worker (lib/worker/wait.redis-port.ts), memory in the harness. */
export interface WaitPort {
  /**
   * Commits the wait with the position entries of the attempt's calls up to it (`positions`) and
   * the attempt's journal (stored if the run suspends), within `room`, the bytes the memo may still
   * take: the position entries count first (past it: `over`), then the wait's outcomes (past it:
   * the refusal marker, see `fitOutcome`). Rejects (lease lost, Redis away, conflict) with the
   * error that ends the attempt.
   */
  suspend(request: SuspendRequest, room: number, positions: Placed[], journal: AttemptJournal): Promise<SuspendReply>;
  /**
   * Validates a child's enqueue as `QueueClient.enqueue` would (typed errors, nothing written),
   * its input against the child's schema where it is known (async: see `ChildRequest.checking`).
   */
  childRequest(workflow: unknown, input: unknown, opts: InvokeOptions | undefined): ChildRequest;
}
