import { SluiceError } from '../errors';
import type { ContinuePort } from '../execution/run.continuation';
import type { ChildRequest, SuspendReply, SuspendRequest, WaitPort } from '../execution/wait.port';
import { entryBytes, type Placed } from '../execution/step.recorder';
import { fitOutcome } from '../execution/wait.outcome';
import type { FakeClock } from './fake.clock';

/**
 * Durable waits in the harness, which runs a workflow without Redis: a sleep advances the fake
 * clock and returns (the attempt carries on, as a run resumed from the memo would), and its
 * outcome joins the memo as in a worker, within the memo's budget as lua/suspend.lua and the
 * promotion count it (position entries first, then the outcome). Signals, events and child workflows need the other side
 * of the wait — a sender, a child's worker — and are refused with a clear error: test them with
 * `SluiceTesting` against Redis. `continueAsNew` is kept for the harness's loop, which starts the
 * run afresh with it.
 */
export class HarnessWaitPort implements WaitPort, ContinuePort {
  /** The new input of the attempt's `ctx.continueAsNew`, once committed. */
  continuedWith?: string;

  constructor(
    private readonly clock: FakeClock,
    private readonly memo: Map<string, string>,
  ) {}

  async suspend(request: SuspendRequest, room: number, positions: Placed[]): Promise<SuspendReply> {
    if (request.kind !== 'sleep')
      throw new SluiceError(
        `WorkflowHarness cannot run ctx.${request.kind === 'child' ? 'invoke' : request.kind === 'signal' ? 'waitForSignal' : 'waitForEvent'}: test it with SluiceTesting against Redis`,
      );
    const fresh = positions.filter(({ field, value }) => this.memo.get(field) !== value);
    const bytes = fresh.reduce((sum, { field, value }) => sum + entryBytes(field, value), 0);
    if (bytes > room) return { over: { key: request.entries[0].placed.key, bytes } };
    let left = room - bytes;
    const wakeAt = request.atMs ?? this.clock.now() + (request.afterMs ?? 0);
    if (wakeAt > this.clock.now()) this.clock.advance(wakeAt - this.clock.now());
    const resumed = new Map<string, string>();
    for (const { field, value } of fresh) this.memo.set(field, value);
    for (const { placed } of request.entries) {
      const [envelope, rest] = fitOutcome(placed.key, '{"t":1}', left);
      left = rest;
      resumed.set(placed.key, envelope);
      this.memo.set(placed.key, envelope);
    }
    return { resumed };
  }

  async continueAsNew(input: string): Promise<void> {
    this.continuedWith = input;
  }

  childRequest(): ChildRequest {
    throw new SluiceError('WorkflowHarness cannot run ctx.invoke: test it with SluiceTesting against Redis');
  }
}
