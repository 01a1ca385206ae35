/** A run this worker claimed in a reserve call, with its step memo. */
export interface Claim {
  id: string;
  workflow: string;
  token: string;
  attempt: number;
  failures: number;
  input: string;
  steps: Map<string, string>;
}

/**
 * Parses a reply that carries claims after a head value (see lua/includes/claim.lua): reserve's
 * head is the ms until the next delayed run, complete's the statuses of its runs and steps.
 */
export function parseClaimReply<H = number>(reply: unknown[]): { head: H; claims: Claim[] } {
  const [head, ...rows] = reply as [H, ...unknown[][]];
  const claims = rows.map((row) => {
    const [id, workflow, token, attempt, failures, input, flatSteps] = row as [string, string, string, number, number, string, string[]];
    const steps = new Map<string, string>();
    for (let i = 0; i < flatSteps.length; i += 2) steps.set(flatSteps[i], flatSteps[i + 1]);
    return { id, workflow, token: String(token), attempt: Number(attempt), failures: Number(failures), input, steps };
  });
  return { head, claims };
}

/**
 * A wake list entry is either the bare marker '1' or a run the enqueue fast path already claimed,
 * '<token> <id> <input>' (see lua/includes/common.lua): a first attempt with an empty memo.
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
    steps: new Map(),
  };
}
