/** A run this worker claimed in a reserve call, with its step memo. */
export interface Claim {
  id: string;
  workflow: string;
  token: string;
  attempt: number;
  failures: number;
  input: string;
  steps: Map<string, string>;
  /** The run's own time limit per attempt (`EnqueueOptions.runTimeoutMs`), when it has one; else the workflow's applies. */
  timeoutMs?: number;
  /**
   * Set only on claims made with the telemetry extras (see {@link CLAIM_EXTRAS}): the run's
   * stored trace context (a propagation carrier as JSON), when it has one.
   */
  trace?: string;
  /** With the extras: ms between the run becoming due and this claim, when the record tells. */
  queueWaitMs?: number;
  /** The run's group, when it has one. */
  group?: string;
  /** How many times the run continued as new (`ctx.continueAsNew`), when it did: its incarnation. */
  generation?: number;
}

/**
 * The memo of every claim of a run with none (most claims): one map for all rather than one per
 * run. Nothing writes into it: the step recorder replaces an empty memo before its first write.
 */
class NoMemo extends Map<string, string> {
  override set(): this {
    throw new Error('a claim with no memo shares its empty map: it is never written into');
  }
}
const NO_MEMO: Map<string, string> = new NoMemo();

/** The claim reply's pseudo memo entry carrying the run's incarnation (see memoOf in lua/includes/claim.lua). */
const GENERATION_ENTRY = '~gen';

/**
 * The flag (added to a claiming call's retry flag) that asks reserve and complete for the
 * telemetry extras on each claim (see withExtras in lua/includes/claim.lua). Only a worker with
 * OpenTelemetry on sends it; without it, claims carry no extras and cost no reply byte more.
 */
export const CLAIM_EXTRAS = 2;

/**
 * Parses the claims of a claiming call's reply (see appendClaim in lua/includes/claim.lua),
 * which follow its head from `reply[from]` on, flat: per claim id, workflow, token, attempt,
 * failures, input, time limit ('' none), group ('' none), the memo's length and entries, then,
 * when the call asked for them (`extras`), trace ('' none) and wait ms (-1 unknown).
 */
export function parseClaims(reply: unknown[], from: number, extras: boolean): Claim[] {
  // Indexed reads, not destructuring: this runs once per claimed run.
  const claims: Claim[] = [];
  let i = from;
  while (i < reply.length) {
    const claim: Claim = {
      id: reply[i] as string,
      workflow: reply[i + 1] as string,
      token: String(reply[i + 2]),
      attempt: Number(reply[i + 3]),
      failures: Number(reply[i + 4]),
      input: reply[i + 5] as string,
      steps: NO_MEMO,
    };
    const timeoutMs = reply[i + 6] as string;
    if (timeoutMs) claim.timeoutMs = Number(timeoutMs);
    const group = reply[i + 7] as string;
    if (group) claim.group = group;
    const memoEnd = i + 9 + Number(reply[i + 8]);
    for (let k = i + 9; k < memoEnd; k += 2) {
      if (reply[k] === GENERATION_ENTRY) claim.generation = Number(reply[k + 1]);
      else (claim.steps === NO_MEMO ? (claim.steps = new Map()) : claim.steps).set(reply[k], reply[k + 1]);
    }
    i = memoEnd;
    if (extras) {
      const [trace, waitMs] = [reply[i], Number(reply[i + 1])];
      if (typeof trace === 'string' && trace !== '') claim.trace = trace;
      if (waitMs >= 0) claim.queueWaitMs = waitMs;
      i += 2;
    }
    claims.push(claim);
  }
  return claims;
}

/**
 * A wake list entry is either the bare marker '1' or a run the enqueue fast path already claimed,
 * '<token> <id> <input>' (see handoffEntry in lua/includes/wakes.lua): a first attempt with an empty memo. It
 * has no trace context nor time limit of its own (a run with either is never fast-pathed, see
 * lua/enqueue.lua: the workflow's limit applies) and waited
 * 0 ms: its enqueue claimed it the moment it was due, and a blocked worker took it at once.
 */
export function parseHandoff(workflow: string, entry: string): Claim | undefined {
  const first = entry.indexOf(' ');
  if (first < 0) return undefined;
  const second = entry.indexOf(' ', first + 1);
  return handoffClaim(workflow, entry.slice(0, first), entry.slice(first + 1, second), entry.slice(second + 1));
}

/** The claim a handoff makes (see {@link parseHandoff}), from its parts. */
export function handoffClaim(workflow: string, token: string, id: string, input: string): Claim {
  return { id, workflow, token, attempt: 1, failures: 0, input, steps: NO_MEMO, queueWaitMs: 0 };
}

/** A handoff published on a worker's handoff channel, `<workflow> <token> <id> <input>` (lua/includes/enqueue.lua deliverHandoff). */
export function parsePublishedHandoff(message: string): Claim | undefined {
  const space = message.indexOf(' ');
  return space > 0 ? parseHandoff(message.slice(0, space), message.slice(space + 1)) : undefined;
}
