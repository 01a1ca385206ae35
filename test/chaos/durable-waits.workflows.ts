/**
 * The workflows of test/chaos/durable-waits.spec.ts, by name and shape: they are registered only
 * in the forked worker processes (durable-waits.process.ts); the test enqueues by name.
 */
export const DW_SLEEPER = 'dwc.sleeper';
export const DW_WAITER = 'dwc.waiter';
export const DW_PARENT = 'dwc.parent';
export const DW_CHILD = 'dwc.child';
/** The event the waiters wait for, each on its input's key. */
export const DW_EVENT = 'dwc.go';

export interface SleeperInput {
  i: number;
  /** ctx.sleep duration. */
  ms: number;
}

export interface SleeperResult {
  i: number;
  /** The pid that executed each step (its memo). */
  before: number;
  after: number;
  attempt: number;
  by: number;
}

export interface WaiterInput {
  i: number;
  key: string;
  /** Wait with a (long, never reached) timeout: the wait is then in the delayed set too. Default: no deadline. */
  timeout?: boolean;
}

export interface WaiterResult {
  i: number;
  /** The key carried by the event's payload (null if the wait timed out). */
  key: string | null;
  before: number;
  after: number;
  attempt: number;
  by: number;
}

export interface ParentInput {
  i: number;
  /** Children to invoke (invokeAll), each but the first sleeping `ms`. */
  children: number;
  ms: number;
}

export interface ChildInput {
  k: number;
  ms: number;
}

export interface ParentResult {
  i: number;
  /** The children's results in call order: 2k each. */
  results: number[];
  before: number;
  after: number;
  attempt: number;
  by: number;
}

/** Step executions read back from the worker processes' effect files: `<run id> <step>` → pids, one per execution. */
export function readEffects(lines: string[]): Map<string, number[]> {
  const executions = new Map<string, number[]>();
  for (const line of lines) {
    if (line === '') continue;
    const [id, step, pid] = line.split(' ');
    const key = `${id} ${step}`;
    executions.set(key, [...(executions.get(key) ?? []), Number(pid)]);
  }
  return executions;
}
