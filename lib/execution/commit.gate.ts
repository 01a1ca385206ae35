import type { AttemptGuard } from './attempt.guard';
import type { StepRecorder } from './step.recorder';

/**
 * What a wait or `continueAsNew` returns once the attempt is over (the run suspended or continued):
 * a promise that never settles. A fresh one each time: the code awaiting it is then unreachable and
 * collected with the attempt, where one shared promise would hold every such attempt's code for ever.
 */
export function abandoned(): Promise<never> {
  return new Promise<never>(() => undefined);
}

/**
 * Lets the steps executing now land, then holds later calls behind a gate while the caller commits
 * a call that may end the attempt (a wait, `continueAsNew`): calls made meanwhile wait on the gate,
 * which `open` releases (never, if the attempt ended). Resolves undefined if the attempt ended
 * meanwhile (a step beside it failed it); throws if it was aborted.
 */
export async function enterCommit(
  recorder: StepRecorder,
  guard: AttemptGuard,
): Promise<{ gate: Promise<void>; open: () => void } | undefined> {
  const previous = recorder.gate;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  recorder.gate = gate;
  if (previous) await previous;
  if (await recorder.settled()) {
    // A step beside the call failed: if the code does not catch it, the attempt fails with it,
    // through promise reactions only, all run before the next macrotask. Suspending first would
    // hide that failure until the run resumed and ran the step again.
    await new Promise((resolve) => setImmediate(resolve));
    if (guard.ended) return undefined;
  }
  if (guard.abort.aborted) throw guard.abort.reason;
  return { gate, open };
}
