import { InvalidInputError, InvalidOptionError, PayloadTooLargeError } from '../errors';
import { checkId } from '../util/names';
import { toMilliseconds, type Duration } from '../util/duration';
import type { Stored } from '../workflow/payload.types';
import { stepScope } from '../workflow/run.scope';
import { checkOptionKeys, readRenamedOption, TIMEOUT_RENAMED } from '../util/option-keys';
import {
  EVENT_WAIT_OPTIONS,
  INVOKE_OPTIONS,
  MAX_INVOKE_ALL,
  MAX_INVOKE_BYTES,
  type EventWaitOptions,
  type InvokeCall,
  type InvokeOptions,
  SIGNAL_WAIT_OPTIONS,
  type SignalWaitOptions,
  type WaitOutcome,
} from '../workflow/wait.types';
import type { AttemptGuard } from './attempt.guard';
import { abandoned, enterCommit } from './commit.gate';
import type { StepRecorder } from './step.recorder';
import { eventTarget } from '../redis/run.layout';
import { childId } from './wait.ids';
import type { ChildRequest, SuspendReply, SuspendRequest, WaitPort } from './wait.port';
import { refusedBytes, toChildOutcome, toWaitOutcome } from './wait.outcome';

/** The keys of an {@link InvokeCall}. */
const INVOKE_CALL_KEYS: readonly string[] = ['workflow', 'input', 'opts'];

/** Furthest ahead a sleep may end, as for an enqueue's `runAt`. */
const MAX_SLEEP_MS = 10 * 365 * 86_400_000;

/**
 * The durable waits of one run attempt: `ctx.sleep`, `sleepUntil`, `waitForSignal`,
 * `waitForEvent`, `invoke` and `invokeAll`. Each is a top-level call of the run, numbered and
 * memoized like a step (the recorder places it): on replay, a wait whose outcome is in the memo
 * returns it at once. Otherwise it lets the steps executing now land, then commits the wait in one
 * token-checked script call; while that call is out, new steps and waits queue behind it. If the
 * wait could end at once (a past deadline, a signal in the mailbox, finished children) the run
 * carries on; otherwise the run gives up its lease and slots in the same call, the attempt ends
 * ({@link onSuspended}), and the wait's promise never settles: the run resumes, in a later
 * attempt on any worker, by replaying up to the wait.
 */
export class RunWaits {
  constructor(
    private readonly runId: string,
    private readonly recorder: StepRecorder,
    private readonly guard: AttemptGuard,
    private readonly port: WaitPort,
    private readonly onSuspended: () => void,
    /** The run's incarnation (`ctx.continueAsNew` count): part of its children's derived ids. */
    private readonly generation = 0,
  ) {}

  async sleep(name: string, duration: Duration): Promise<void> {
    this.topLevel('ctx.sleep');
    checkId(name, 'ctx.sleep name');
    const afterMs = toMilliseconds(duration, `ctx.sleep("${name}") duration`);
    await this.wait({ kind: 'sleep', afterMs, target: '', entries: [{ placed: this.recorder.place('sleep', name) }] });
  }

  async sleepUntil(name: string, until: Date): Promise<void> {
    this.topLevel('ctx.sleepUntil');
    checkId(name, 'ctx.sleepUntil name');
    if (!(until instanceof Date) || Number.isNaN(until.getTime()))
      throw new InvalidOptionError(`ctx.sleepUntil("${name}") until`, 'must be a valid Date');
    if (until.getTime() - Date.now() > MAX_SLEEP_MS)
      throw new InvalidOptionError(`ctx.sleepUntil("${name}") until`, 'must be at most 10 years from now');
    await this.wait({ kind: 'sleep', atMs: until.getTime(), target: '', entries: [{ placed: this.recorder.place('sleep', name) }] });
  }

  async waitForSignal<T>(name: string, opts?: SignalWaitOptions): Promise<WaitOutcome<T>> {
    this.topLevel('ctx.waitForSignal');
    checkId(name, 'ctx.waitForSignal name');
    const afterMs = timeoutOf(opts, SIGNAL_WAIT_OPTIONS, 'ctx.waitForSignal', name);
    const [raw] = await this.wait({
      kind: 'signal',
      afterMs,
      target: name,
      entries: [{ placed: this.recorder.place('signal', `signal:${name}`) }],
    });
    return toWaitOutcome<T>(raw);
  }

  async waitForEvent<T>(name: string, opts?: EventWaitOptions): Promise<WaitOutcome<T>> {
    this.topLevel('ctx.waitForEvent');
    checkId(name, 'ctx.waitForEvent name');
    const afterMs = timeoutOf(opts, EVENT_WAIT_OPTIONS, 'ctx.waitForEvent', name);
    const key = opts?.key === undefined || opts.key === '' ? '' : checkId(opts.key, `ctx.waitForEvent("${name}") key`);
    const [raw] = await this.wait({
      kind: 'event',
      afterMs,
      target: eventTarget(name, key),
      entries: [{ placed: this.recorder.place('event', `event:${name}`) }],
    });
    return toWaitOutcome<T>(raw);
  }

  async invoke<T>(workflow: unknown, input: unknown, opts?: InvokeOptions): Promise<Stored<T>> {
    const [result] = await this.invokeAll<T>([{ workflow, input, opts }], true);
    return result;
  }

  /**
   * Starts every child, waits for all, resolves with their results in call order or throws the first failure.
   * @param single called as `ctx.invoke` (errors name its `opts`)
   */
  async invokeAll<T>(calls: InvokeCall[], single = false): Promise<Stored<T>[]> {
    this.topLevel('ctx.invokeAll');
    if (!Array.isArray(calls) || calls.length === 0 || calls.length > MAX_INVOKE_ALL) {
      throw new InvalidInputError('ctx.invokeAll calls', `must be an array of 1 to ${MAX_INVOKE_ALL} { workflow, input, opts? }`);
    }
    const entries = calls.map((call, index) => {
      if (call === null || typeof call !== 'object')
        throw new InvalidInputError(`ctx.invokeAll calls[${index}]`, 'must be an object { workflow, input, opts? }');
      if (!single) checkOptionKeys(call, INVOKE_CALL_KEYS, `ctx.invokeAll calls[${index}]`);
      checkOptionKeys(call.opts, INVOKE_OPTIONS, single ? 'ctx.invoke opts' : `ctx.invokeAll calls[${index}].opts`);
      // Checked first; the memo key takes the workflow's name, and the id (unless given) the memo key.
      const request = this.port.childRequest(call.workflow, call.input, call.opts);
      const placed = this.recorder.place('invoke', `invoke:${request.workflow}`);
      return {
        placed,
        child: call.opts?.id === undefined ? { ...request, id: childId(this.runId, placed.key, this.generation) } : request,
      };
    });
    // One script call carries every child's input: bounded, so it stays a short call.
    const bytes = entries.reduce((sum, { child }) => sum + Buffer.byteLength(child.input), 0);
    if (bytes > MAX_INVOKE_BYTES)
      throw new PayloadTooLargeError('ctx.invokeAll inputs', bytes, MAX_INVOKE_BYTES, 'MAX_INVOKE_BYTES, all inputs of one invokeAll');
    const ids = entries.map(({ child }) => child.id);
    if (new Set(ids).size !== ids.length) throw new InvalidInputError('ctx.invokeAll calls', 'must not give two children the same id');
    // Children whose input schema is async: checked before the commit (placed already, in call order).
    if (someChecking(entries)) await Promise.all(entries.flatMap(({ child }) => (child.checking ? [child.checking] : [])));
    const raws = await this.wait({ kind: 'child', target: '', entries });
    return raws.map((raw, index) => {
      const outcome = toChildOutcome<T>(ids[index], raw);
      if (!outcome.ok) throw outcome.error;
      return outcome.result;
    });
  }

  /**
   * A wait is a top-level call of the run. Inside a step's `fn` it would wait for that step to
   * finish, which waits for it: refused, failing the run (a retry would do the same).
   */
  private topLevel(call: string): void {
    if (stepScope.getStore()?.runner === this.recorder) {
      throw new InvalidInputError(
        call,
        "cannot be called inside a step's fn: a wait is a top-level call of the run (call it between steps)",
      );
    }
  }

  /** Replays the wait from the memo, or commits it (see the class comment). Resolves with the outcomes in entry order. */
  private async wait(request: SuspendRequest): Promise<string[]> {
    const { journal } = this.recorder;
    const kind = request.kind === 'child' ? 'invoke' : request.kind;
    const known = request.entries.map(({ placed }) => this.recorder.recorded(placed.key));
    if (known.every((raw) => raw !== undefined)) {
      for (const { placed } of request.entries) journal.replayed(kind, placed.key);
      return this.fitting(request, known);
    }
    const entered = await enterCommit(this.recorder, this.guard);
    if (!entered) return abandoned();
    const { gate, open } = entered;
    // Every call so far has been placed (calls made after this one wait on its gate).
    const written = this.recorder.unrecordedPositions();
    const { positions } = written;
    // Left open if the run suspends: the journal marks the wait the attempt ended in.
    const ends = request.entries.map(({ placed }) => journal.begin(kind, placed.key));
    let reply: SuspendReply;
    try {
      reply = await this.port.suspend(request, this.recorder.room(), positions, journal);
    } catch (error) {
      for (const end of ends) end('failed');
      // Ends the attempt even if the code catches it: its outcome is for the worker to commit.
      this.guard.expire(error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
    if (reply === 'suspended') {
      this.onSuspended();
      return abandoned();
    }
    if ('over' in reply) {
      for (const end of ends) end('failed');
      const error = this.recorder.overBudget(reply.over.key, reply.over.bytes);
      this.guard.expire(error);
      throw error;
    }
    for (const end of ends) end('ok');
    this.recorder.positionsRecorded(written);
    for (const [key, raw] of reply.resumed) this.recorder.remember(key, raw);
    if (this.recorder.gate === gate) this.recorder.gate = undefined;
    open();
    return this.fitting(
      request,
      request.entries.map(({ placed }) => reply.resumed.get(placed.key) as string),
    );
  }

  /**
   * The outcomes, unless one was refused for the memo's budget (`{"x":<bytes>}`, see fitOutcome in
   * lua/includes/waits.lua): then the run fails for good with `StepMemoLimitError` at this wait.
   */
  private fitting(request: SuspendRequest, raws: string[]): string[] {
    raws.forEach((raw, index) => {
      const refused = refusedBytes(raw);
      if (refused === undefined) return;
      const error = this.recorder.overBudget(request.entries[index].placed.key, refused);
      this.guard.expire(error);
      throw error;
    });
    return raws;
  }
}

/** Checks a wait's options (their keys first) and returns its timeout in ms, if any. */
function timeoutOf(
  opts: SignalWaitOptions | EventWaitOptions | undefined,
  allowed: readonly string[],
  call: string,
  name: string,
): number | undefined {
  if (opts !== undefined && (opts === null || typeof opts !== 'object'))
    throw new InvalidOptionError(`${call}("${name}") options`, 'must be an object');
  checkOptionKeys(opts, allowed, `${call} opts`, [TIMEOUT_RENAMED]);
  const timeout = readRenamedOption<Duration>(opts, TIMEOUT_RENAMED, `${call} opts`);
  return timeout === undefined
    ? undefined
    : toMilliseconds(timeout, `${call}("${name}") ${opts?.timeoutMs === undefined ? 'timeout' : 'timeoutMs'}`);
}

/** Whether a child's input schema is still validating (a plain loop: no closure when none is). */
function someChecking(entries: ReadonlyArray<{ child: ChildRequest }>): boolean {
  for (let index = 0; index < entries.length; index++) if (entries[index].child.checking) return true;
  return false;
}
