import { NonRetryableError, type RunErrorInfo } from './run.errors';
import { SluiceError } from './sluice.error';

/**
 * On replay, the run's calls do not follow its recorded ones: a step renamed, inserted or removed
 * before a wait the run passed, or a wait turned into a step (see DeterminismGuard in
 * lib/execution/determinism.guard.ts): the workflow's code changed under a running run in a way its
 * memo cannot follow. The run fails for good (no retry could fix it). See "Versioning workflow
 * code" in docs/workflows.md.
 */
export class NonDeterminismError extends NonRetryableError {
  constructor(
    /** The run whose replay diverged. */
    override readonly runId: string,
    /** The call's position among the run's top-level steps and waits (0 = the first). */
    readonly position: number,
    /** What the memo recorded there, as '<kind>:<name>#<occurrence>'. */
    readonly recorded: string,
    /** What the code called there now, in the same form. */
    readonly called: string,
  ) {
    super(
      `Run ${runId} is not deterministic: call #${position} is ${called}, but the run recorded ${recorded} there (the workflow's code changed under a running run)`,
    );
  }
}

/**
 * A child workflow started with `ctx.invoke` failed for good or was cancelled. Thrown into the
 * parent where it awaits the child (the same on every replay); the parent may catch it. Uncaught,
 * it fails the parent for good at once: another attempt would only replay it. `retry` the child,
 * then the parent, to re-drive the parent: the retry drops the child's failure from its memo.
 */
export class ChildWorkflowFailedError extends SluiceError {
  constructor(
    /** The child run's id. */
    readonly childId: string,
    /** 'failed' or 'cancelled'. */
    readonly state: 'failed' | 'cancelled',
    /** The child's error as stored: its name, message and stack. */
    readonly childError: RunErrorInfo | null,
  ) {
    super(`Child run ${childId} ${state}${childError ? `: ${childError.name}: ${childError.message}` : ''}`);
  }
}

/**
 * `ctx.invoke` with an `id` that names a run another parent invoked (a run has at most one
 * parent), or the invoking run itself or one of its ancestors (a wait nothing would end). The
 * parent's attempt fails without retry; nothing was written.
 */
export class ChildRunConflictError extends NonRetryableError {
  constructor(
    /** The id given to `ctx.invoke` (`InvokeOptions.id`). */
    readonly childId: string,
  ) {
    super(
      `Run ${childId} cannot be this run's child: it is another run's child, this run itself, or one of its ancestors; pick another id for ctx.invoke`,
    );
  }
}

/** `QueueClient.signal` to a run whose mailbox is full: the signal was not stored. */
export class SignalMailboxFullError extends SluiceError {
  constructor(
    /** The run signalled. */
    override readonly runId: string,
    /** Most signals a mailbox holds ({@link MAX_MAILBOX}). */
    readonly limit: number,
  ) {
    super(`Run ${runId} has ${limit} signals waiting in its mailbox already (the limit); the signal was not stored`);
  }
}
