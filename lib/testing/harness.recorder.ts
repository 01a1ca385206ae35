import { checkStepCall, type StepRecorder } from '../execution/step.recorder';
import type { Stored } from '../workflow/payload.types';
import { stepScope, type StepRunner } from '../workflow/run.scope';
import { type StepCallOptions, type StepContext, type StepFn } from '../workflow/step.options';
import type { FailStepOptions, HarnessStepReport } from './harness.types';

/** A failure registered with `failStep`. */
export interface StepFault extends FailStepOptions {
  name: string;
}

/**
 * The step runner of one harness attempt. Memoizing, numbering, encoding and the nested-step
 * rule are the production {@link StepRecorder}'s (this only wraps it, so the harness cannot drift
 * from the worker); this adds the report of what executed or replayed, and the injected failures.
 */
export class HarnessRecorder implements StepRunner {
  constructor(
    private readonly recorder: StepRecorder,
    private readonly attempt: number,
    private readonly faults: readonly StepFault[],
    readonly steps: HarnessStepReport[] = [],
  ) {}

  async step<T>(name: string, fn: StepFn<T>, options?: StepCallOptions): Promise<Stored<T>> {
    // Nested in a step of this run: the recorder runs it plainly, as part of its parent; it is not
    // a step of its own, so it is neither reported nor failed. Bad arguments: the recorder throws.
    if (stepScope.getStore()?.runner === this.recorder || !validCall(name, fn, options)) return this.recorder.step(name, fn, options);

    // The recorder numbers the call as it is made, synchronously, below: this is the number it takes.
    const occurrence = this.recorder.nextOccurrence(name);
    const key = `${name}#${occurrence}`;
    const report: HarnessStepReport = { key, name, occurrence, outcome: 'replayed' };
    this.steps.push(report);
    // The recorder calls this only if the step is not in the memo (once per try); if it never
    // runs, it replayed.
    const execute = async (step: StepContext): Promise<T> => {
      report.outcome = 'pending';
      if (step.attempt > 1) report.tries = step.attempt;
      const failing = this.faults.find((f) => f.name === name && appliesTo(f, occurrence, this.attempt) && appliesToTry(f, step.attempt));
      if (failing && failing.when !== 'after') throw faultError(failing, key, this.attempt);
      const value = await fn(step);
      if (failing) throw faultError(failing, key, this.attempt);
      return value;
    };
    try {
      const value = await this.recorder.step(name, execute, options);
      if (report.outcome === 'pending') report.outcome = 'executed';
      return value;
    } catch (error) {
      // Thrown by the step (or by saving its result): nothing was saved.
      report.outcome = 'failed';
      throw error;
    }
  }
}

/** Whether the recorder would accept the call (else it throws, and the call is not reported). */
function validCall(name: string, fn: unknown, options: StepCallOptions | undefined): boolean {
  try {
    checkStepCall(name, fn, options);
    return true;
  } catch {
    return false;
  }
}

function appliesToTry(fault: StepFault, tryNumber: number): boolean {
  if (fault.onTry === undefined) return true;
  return Array.isArray(fault.onTry) ? fault.onTry.includes(tryNumber) : fault.onTry === tryNumber;
}

function appliesTo(fault: StepFault, occurrence: number, attempt: number): boolean {
  if (fault.occurrence !== undefined && fault.occurrence !== occurrence) return false;
  if (fault.onAttempt === undefined) return true;
  return Array.isArray(fault.onAttempt) ? fault.onAttempt.includes(attempt) : fault.onAttempt === attempt;
}

function faultError(fault: StepFault, key: string, attempt: number): unknown {
  return 'error' in fault && fault.error !== undefined
    ? fault.error
    : new Error(`Injected failure of step "${key}" on attempt ${attempt} (failStep)`);
}
