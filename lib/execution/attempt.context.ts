import type { StepRunner } from '../workflow/run.scope';
import type { RunContext } from '../workflow/workflow.types';
import type { StandardSchemaV1 } from '../workflow/standard-schema';
import type { AttemptGuard } from './attempt.guard';
import type { AttemptPorts } from './attempt.ports';
import type { LazyAbort } from './lazy.abort';
import { RunContinuation } from './run.continuation';
import { RunWaits } from './run.waits';
import type { StepRecorder } from './step.recorder';

/** What the attempt's waits and `continueAsNew` end it with (see AttemptRunner). */
export interface AttemptEnds {
  readonly suspended: () => void;
  readonly continued: () => void;
}

/**
 * The `ctx` one attempt's `run` gets. A class, not an object literal: a literal with the `signal`
 * getter and a dozen closures is a dictionary-mode object, about 3 µs of CPU per attempt
 * (measured), ten times this. The methods stay own properties (closures), so code that takes
 * `const { step, sleep } = ctx` apart keeps working; `signal` is a getter on the prototype, which
 * makes the attempt's AbortController only when read (see LazyAbort). The waits are made on the
 * first of them: a run that never waits pays nothing for them.
 */
export class AttemptContext implements RunContext {
  readonly runId: string;
  readonly attempt: number;
  readonly step: RunContext['step'];
  readonly progress: RunContext['progress'];
  readonly sleep: RunContext['sleep'];
  readonly sleepUntil: RunContext['sleepUntil'];
  readonly waitForSignal: RunContext['waitForSignal'];
  readonly waitForEvent: RunContext['waitForEvent'];
  readonly invoke: RunContext['invoke'];
  readonly invokeAll: RunContext['invokeAll'];
  readonly continueAsNew: RunContext['continueAsNew'];
  readonly #abort: LazyAbort;

  constructor(
    spec: { id: string; workflow: string; attempt: number; generation?: number },
    abort: LazyAbort,
    steps: StepRunner,
    recorder: StepRecorder,
    guard: AttemptGuard,
    ports: AttemptPorts,
    maxPayloadBytes: number,
    ends: AttemptEnds,
    /** The workflow's input schema, if any: `continueAsNew` validates its input with it. */
    inputSchema?: StandardSchemaV1,
  ) {
    this.runId = spec.id;
    this.attempt = spec.attempt;
    this.#abort = abort;
    let waits: RunWaits | undefined;
    const waitsOf = () => (waits ??= new RunWaits(spec.id, recorder, guard, ports.commits(), ends.suspended, spec.generation));
    this.step = (name, fn, options) => steps.step(name, fn, options);
    // After the attempt ended (code that ignored its signal), a report writes nothing.
    this.progress = (value) => (guard.ended ? Promise.resolve() : ports.progress(value));
    this.sleep = (name, duration) => waitsOf().sleep(name, duration);
    this.sleepUntil = (name, until) => waitsOf().sleepUntil(name, until);
    this.waitForSignal = (name, opts) => waitsOf().waitForSignal(name, opts);
    this.waitForEvent = (name, opts) => waitsOf().waitForEvent(name, opts);
    this.invoke = (workflow, input, opts) => waitsOf().invoke(workflow, input, opts) as never;
    this.invokeAll = (calls) => waitsOf().invokeAll(calls) as never;
    const { workflow } = spec;
    this.continueAsNew = (input) =>
      new RunContinuation(recorder, guard, ports.commits(), maxPayloadBytes, ends.continued).continueAsNew(input, workflow, inputSchema);
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }
}
