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

/** Parses the reserve script's reply (see lua/reserve.lua). */
export function parseReserveReply(reply: unknown[]): { nextDueMs: number; claims: Claim[] } {
  const [nextDueMs, ...rows] = reply as [number, ...unknown[][]];
  const claims = rows.map((row) => {
    const [id, workflow, token, attempt, failures, input, flatSteps] = row as [string, string, string, number, number, string, string[]];
    const steps = new Map<string, string>();
    for (let i = 0; i < flatSteps.length; i += 2) steps.set(flatSteps[i], flatSteps[i + 1]);
    return { id, workflow, token: String(token), attempt: Number(attempt), failures: Number(failures), input, steps };
  });
  return { nextDueMs: Number(nextDueMs), claims };
}
