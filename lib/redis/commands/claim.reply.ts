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
 * Parses a reply that carries claims after a head value (see lua/includes/claim.lua): reserve's
 * head is the ms until the next delayed run, complete's the statuses of its runs and steps.
 */
export function parseClaimReply<H = number>(reply: unknown[]): { head: H; claims: Claim[] } {
  // Indexed loops, not destructuring: this runs once per claimed run.
  const claims: Claim[] = [];
  for (let i = 1; i < reply.length; i++) claims.push(parseClaim(reply[i] as unknown[]));
  return { head: reply[0] as H, claims };
}

/** One claim row: id, workflow, token, attempt, failures, input, flat memo, time limit, then group and extras. */
function parseClaim(row: unknown[]): Claim {
  const flatSteps = row[6] as string[];
  let steps = NO_MEMO;
  let generation: string | undefined;
  for (let i = 0; i < flatSteps.length; i += 2) {
    if (flatSteps[i] === GENERATION_ENTRY) generation = flatSteps[i + 1];
    else (steps === NO_MEMO ? (steps = new Map()) : steps).set(flatSteps[i], flatSteps[i + 1]);
  }
  const claim: Claim = {
    id: row[0] as string,
    workflow: row[1] as string,
    token: String(row[2]),
    attempt: Number(row[3]),
    failures: Number(row[4]),
    input: row[5] as string,
    steps,
  };
  const timeoutMs = row[7] as string;
  if (timeoutMs) claim.timeoutMs = Number(timeoutMs);
  if (generation !== undefined) claim.generation = Number(generation);
  if (typeof row[8] === 'string' && row[8] !== '') claim.group = row[8];
  if (row.length > 9) addExtras(claim, row);
  return claim;
}

/**
 * Reads the telemetry extras of a claim row: `[9]` trace ('' none), `[10]` wait ms (-1 unknown).
 * (`[7]` is the run's time limit, on every row; `[8]` its group, on rows of grouped runs and
 * rows with the extras.)
 */
function addExtras(claim: Claim, row: unknown[]): void {
  const [trace, waitMs] = [row[9], Number(row[10])];
  if (typeof trace === 'string' && trace !== '') claim.trace = trace;
  if (waitMs >= 0) claim.queueWaitMs = waitMs;
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
  return {
    id: entry.slice(first + 1, second),
    workflow,
    token: entry.slice(0, first),
    attempt: 1,
    failures: 0,
    input: entry.slice(second + 1),
    steps: NO_MEMO,
    queueWaitMs: 0,
  };
}
