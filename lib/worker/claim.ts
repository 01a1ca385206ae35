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
 * head is the ms until the next delayed run, complete's the status of each completed run.
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
