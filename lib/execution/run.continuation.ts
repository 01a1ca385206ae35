import { InvalidInputError } from '../errors';
import { encodePayload } from '../redis/payload.codec';
import { stepScope } from '../workflow/run.scope';
import { checkInput } from '../workflow/schema.validate';
import type { StandardSchemaV1 } from '../workflow/standard-schema';
import type { AttemptGuard } from './attempt.guard';
import { abandoned, enterCommit } from './commit.gate';
import type { StepRecorder } from './step.recorder';

/** The commit of `ctx.continueAsNew`: lua/continue.lua in a worker, the harness's own loop in tests. */
export interface ContinuePort {
  /** Starts the run afresh with `input` (encoded) and an empty memo; rejects (lease lost, Redis away) with the error that ends the attempt. */
  continueAsNew(input: string): Promise<void>;
}

/**
 * `ctx.continueAsNew(input)` of one attempt: the run ends this execution and starts again, under
 * the same id, with `input` and an empty memo — so a workflow that loops for ever (a poller, an
 * entity) keeps a bounded memo, and each claim of it a bounded reply. Like a wait it is a
 * top-level call: the steps executing now land first, later calls wait behind it, and the commit
 * is one token-checked script call that also gives up the lease and every slot; the attempt then
 * ends ({@link onContinued}) and the call's promise never settles.
 */
export class RunContinuation {
  constructor(
    private readonly recorder: StepRecorder,
    private readonly guard: AttemptGuard,
    private readonly port: ContinuePort,
    private readonly maxPayloadBytes: number,
    private readonly onContinued: () => void,
  ) {}

  /** @param input checked, with `schema` when there is one, as an enqueue of `workflow` would be */
  async continueAsNew(input: unknown, workflow: string, schema?: StandardSchemaV1): Promise<never> {
    if (stepScope.getStore()?.runner === this.recorder) {
      throw new InvalidInputError(
        'ctx.continueAsNew',
        "cannot be called inside a step's fn: it ends the run's execution (call it from run, between steps)",
      );
    }
    // Checked before anything is written, with the errors an enqueue's input gets.
    const encoded = encodePayload(input, 'ctx.continueAsNew input', this.maxPayloadBytes);
    // The raw input is stored, as for an enqueue: the next incarnation validates it again.
    const checking = schema && checkInput({ name: workflow, input: schema }, input, 'ctx.continueAsNew input');
    if (checking) await checking;
    // The gate never opens: nothing the attempt calls after this runs.
    if (!(await enterCommit(this.recorder, this.guard))) return abandoned();
    try {
      await this.port.continueAsNew(encoded);
    } catch (error) {
      this.guard.expire(error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
    this.onContinued();
    return abandoned();
  }
}
