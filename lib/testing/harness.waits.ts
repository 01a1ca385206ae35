import { SluiceError } from '../errors';
import type { EnqueueRequest } from '../client/enqueue.options';
import type { SuspendReply, SuspendRequest, WaitPort } from '../worker/run.waits';
import type { Placed } from '../worker/step.recorder';
import type { FakeClock } from './fake.clock';

/**
 * Durable waits in the harness, which runs a workflow without Redis: a sleep advances the fake
 * clock and returns (the attempt carries on, as a run resumed from the memo would), and its
 * outcome joins the memo as in a worker. Signals, events and child workflows need the other side
 * of the wait — a sender, a child's worker — and are refused with a clear error: test them with
 * `SluiceTesting` against Redis.
 */
export class HarnessWaitPort implements WaitPort {
  constructor(
    private readonly clock: FakeClock,
    private readonly memo: Map<string, string>,
  ) {}

  async suspend(request: SuspendRequest, _room: number, positions: Placed[]): Promise<SuspendReply> {
    if (request.kind !== 'sleep') throw new SluiceError(`WorkflowHarness cannot run ctx.${request.kind === 'child' ? 'invoke' : request.kind === 'signal' ? 'waitForSignal' : 'waitForEvent'}: test it with SluiceTesting against Redis`);
    const wakeAt = request.atMs ?? this.clock.now() + (request.afterMs ?? 0);
    if (wakeAt > this.clock.now()) this.clock.advance(wakeAt - this.clock.now());
    const resumed = new Map<string, string>();
    for (const { field, value } of positions) this.memo.set(field, value);
    for (const { placed } of request.entries) {
      resumed.set(placed.key, '{"t":1}');
      this.memo.set(placed.key, '{"t":1}');
    }
    return { resumed };
  }

  childRequest(): EnqueueRequest {
    throw new SluiceError('WorkflowHarness cannot run ctx.invoke: test it with SluiceTesting against Redis');
  }
}
