import type { AttemptPorts } from '../execution/attempt.ports';
import type { RunAbort } from '../execution/attempt.guard';
import type { StepRecorder } from '../execution/step.recorder';
import { decodePayload } from '../redis/payload.codec';
import { encodeProgress } from '../redis/progress.codec';
import type { FakeClock } from './fake.clock';
import { HarnessRecorder, type StepFault } from './harness.recorder';
import type { HarnessAttempt } from './harness.types';
import { HarnessWaitPort } from './harness.waits';

/**
 * One harness attempt's ports, in memory: step saves go to the run's memo (refused once the
 * attempt is over, as a worker's lease token refuses them), waits to {@link HarnessWaitPort},
 * every progress value to the report. A step's waits between tries go on the fake clock, reported
 * in `stepRetryDelaysMs` and never slept (its time limits stay real time: they bound code that
 * really runs).
 */
export class HarnessAttemptPorts implements AttemptPorts {
  private open = true;
  private readonly port: HarnessWaitPort;
  /** What the attempt's steps did, for its report (see HarnessRecorder). */
  recorder?: HarnessRecorder;

  constructor(
    private readonly memo: Map<string, string>,
    private readonly clock: FakeClock,
    readonly random: () => number,
    private readonly report: HarnessAttempt,
    private readonly faults: readonly StepFault[],
    private readonly maxPayloadBytes: number,
  ) {
    this.port = new HarnessWaitPort(clock, memo);
  }

  /** The new input of a `ctx.continueAsNew` the attempt committed, if it did. */
  get continuedWith(): string | undefined {
    return this.port.continuedWith;
  }

  async saveStep(key: string, encoded: string): Promise<boolean> {
    if (!this.open) return false;
    this.memo.set(key, encoded);
    return true;
  }

  commits(): HarnessWaitPort {
    return this.port;
  }

  // Every value is recorded (production's throttle may skip some in between, never the last one
  // awaited), with the same checks and errors.
  async progress(value: unknown): Promise<void> {
    const encoded = encodeProgress(value, this.maxPayloadBytes);
    if (this.open) this.report.progress.push(decodePayload(encoded));
  }

  ended(): void {
    this.open = false;
  }

  readonly sleep = async (ms: number, run: RunAbort): Promise<void> => {
    if (run.aborted) return;
    this.report.stepRetryDelaysMs.push(ms);
    this.clock.advance(ms);
  };

  steps(recorder: StepRecorder): HarnessRecorder {
    return (this.recorder = new HarnessRecorder(recorder, this.report.attempt, this.faults, this.report.steps));
  }
}
