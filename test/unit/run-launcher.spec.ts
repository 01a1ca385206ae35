import { LeaseLostError, LeaseUnconfirmedError, RunCancelledError } from '../../lib/errors';
import type { Claim } from '../../lib/redis/commands/claim.reply';
import { ActiveRuns } from '../../lib/worker/active-runs';
import { ClaimSequencer } from '../../lib/worker/claim.sequencer';
import { COMMIT_BATCH_CAP, HELD_MAX_MS, RunLauncher } from '../../lib/worker/run.launcher';

/** A run whose code the test ends by hand; its commit settles when the test says. */
interface Pending {
  claim: Claim;
  finishCode(): void;
  commit(): void;
}

function setup(concurrency: number) {
  const active = new ActiveRuns();
  const started: Pending[] = [];
  const handedBack: string[] = [];
  let stopping = false;
  let executing = 0;
  let mostExecuting = 0;
  const launcher = new RunLauncher({
    concurrency,
    active,
    execute: (claim, _abort, codeDone) =>
      new Promise<void>((resolve) => {
        executing++;
        mostExecuting = Math.max(mostExecuting, executing);
        started.push({
          claim,
          finishCode: () => {
            executing--;
            codeDone();
          },
          commit: resolve,
        });
      }),
    handBack: (claims) => handedBack.push(...claims.map((c) => c.id)),
    failed: () => undefined,
    stopping: () => stopping,
  });
  const claim = (id: string): Claim => ({ id, token: '1', workflow: 'w', attempt: 1, failures: 0, input: '', steps: new Map() });
  return { active, launcher, started, handedBack, claim, stop: () => (stopping = true), mostExecuting: () => mostExecuting };
}

/**
 * Runs `n` runs through one slot, each taking `ms` of code, so the launcher learns their length.
 * Runs of 0 ms see a clock that stands still: on a busy machine the launch and the end of a run
 * may otherwise fall in two milliseconds, and the launcher would learn 1 ms.
 */
async function teach(t: ReturnType<typeof setup>, n: number, ms: number) {
  const clock = ms === 0 ? jest.spyOn(Date, 'now').mockReturnValue(Date.now()) : undefined;
  try {
    for (let i = 0; i < n; i++) {
      t.launcher.launch(t.claim(`warm-${i}`));
      const run = t.started.at(-1)!;
      if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
      run.finishCode();
      run.commit();
      await new Promise(setImmediate);
    }
  } finally {
    clock?.mockRestore();
  }
}

describe('RunLauncher', () => {
  it('holds nothing until it knows how long runs take', () => {
    const t = setup(2);
    expect(t.launcher.capacity()).toBe(2);
  });

  it('holds runs ready while runs are short, and starts them as slots free, never beyond the concurrency', async () => {
    const t = setup(3);
    await teach(t, 3, 0);
    expect(t.launcher.capacity()).toBe(2 * COMMIT_BATCH_CAP); // 3 + 32 held, rounded up to whole commit batches
    const before = t.started.length;
    for (let i = 0; i < 6; i++) t.launcher.launch(t.claim(`r${i}`));
    expect(t.started.length - before).toBe(3); // three slots: three start, three held
    expect(t.active.size).toBe(6);
    for (let i = 0; i < 3; i++) {
      // Its code done, the next starts before the commit of the one before settles.
      t.started[before + i].finishCode();
      expect(t.started.length - before).toBe(4 + i);
    }
    t.started.slice(before + 3).forEach((run) => run.finishCode());
    t.started.forEach((run) => run.commit());
    await new Promise(setImmediate);
    expect(t.active.size).toBe(0);
    expect(t.mostExecuting()).toBe(3);
  });

  it('holds none while its claims are grouped (held runs would start ahead of a newly arrived group)', async () => {
    const t = setup(2);
    await teach(t, 3, 0);
    expect(t.launcher.capacity()).toBe(2 * COMMIT_BATCH_CAP);
    t.launcher.launch({ ...t.claim('tenant-run'), group: 'tenant' });
    expect(t.launcher.capacity()).toBe(2);
    t.launcher.launch(t.claim('plain-1'));
    expect(t.launcher.capacity()).toBe(2);
    t.launcher.launch(t.claim('plain-2'));
    expect(t.launcher.capacity()).toBe(2 * COMMIT_BATCH_CAP);
  });

  it('holds none once runs are long', async () => {
    const t = setup(1);
    await teach(t, 3, 30);
    expect(t.launcher.capacity()).toBe(1);
  });

  /**
   * One slot: 'running' starts, then `aborted` (each aborted with its reason) and 'held' are held;
   * once 'running' ends, returns the ids started since.
   */
  async function heldAborted(aborted: Record<string, Error>) {
    const t = setup(1);
    await teach(t, 2, 0);
    const first = t.started.length;
    for (const id of ['running', ...Object.keys(aborted), 'held']) t.launcher.launch(t.claim(id));
    for (const [id, reason] of Object.entries(aborted)) t.active.get(id)!.abort.abort(reason);
    t.started.at(-1)!.finishCode();
    return { t, started: t.started.slice(first).map((r) => r.claim.id) };
  }

  it('drops a held run cancelled while it waited, and hands the held runs back at stop', async () => {
    const { t, started } = await heldAborted({ cancelled: new RunCancelledError('cancelled', 'test') });
    // 'cancelled' was skipped: 'held' started.
    expect(started).toEqual(['running', 'held']);
    expect(t.active.get('cancelled')).toBeUndefined();
    t.launcher.launch(t.claim('unstarted'));
    t.stop();
    t.launcher.handBackHeld();
    expect(t.handedBack).toEqual(['unstarted']);
    expect(t.active.get('unstarted')).toBeUndefined();
  });

  it('hands back a held run whose lease no beat could confirm, and drops one whose lease was lost', async () => {
    const { t, started } = await heldAborted({
      unconfirmed: new LeaseUnconfirmedError('unconfirmed', 3_000),
      lost: new LeaseLostError('lost'),
    });
    // Neither aborted run started; the unconfirmed one went back to the queue, the lost one is someone else's.
    expect(started).toEqual(['running', 'held']);
    expect(t.handedBack).toEqual(['unconfirmed']);
    expect(t.active.get('unconfirmed')).toBeUndefined();
    expect(t.active.get('lost')).toBeUndefined();
  });

  it(`hands back a run held longer than ${HELD_MAX_MS} ms (the run ahead of it turned long)`, async () => {
    const t = setup(1);
    await teach(t, 2, 0);
    jest.useFakeTimers();
    try {
      t.launcher.launch(t.claim('long'));
      t.launcher.launch(t.claim('waiting'));
      jest.advanceTimersByTime(HELD_MAX_MS + 1);
      expect(t.handedBack).toEqual(['waiting']);
      expect(t.active.get('waiting')).toBeUndefined();
      expect(t.active.get('long')).toBeDefined();
    } finally {
      jest.useRealTimers();
    }
  });
});

describe('ClaimSequencer', () => {
  it('launches claims in the order their calls were sent, whatever order the replies settle in', () => {
    const launched: string[] = [];
    const sequencer = new ClaimSequencer((claim) => launched.push(claim.id));
    const reserve = sequencer.ticket();
    const refill = sequencer.ticket();
    const failed = sequencer.ticket();
    const later = sequencer.ticket();
    const claim = (id: string) => ({ id, token: '1', workflow: 'w', attempt: 1, failures: 0, input: '', steps: new Map<string, string>() });
    sequencer.deliver(refill, [claim('b')]);
    sequencer.deliver(later, [claim('d')]);
    expect(launched).toEqual([]);
    sequencer.deliver(reserve, [claim('a')]);
    expect(launched).toEqual(['a', 'b']);
    sequencer.deliver(failed, []);
    expect(launched).toEqual(['a', 'b', 'd']);
  });

  it("counts a call's slots as promised until its claims are launched, not when they arrive early", () => {
    const sequencer = new ClaimSequencer(() => undefined);
    const reserve = sequencer.ticket(5);
    const refill = sequencer.ticket(3);
    expect(sequencer.promised).toBe(8);
    sequencer.deliver(refill, []);
    expect(sequencer.promised).toBe(8); // waiting behind the reserve: its claims are not launched yet
    sequencer.deliver(reserve, []);
    expect(sequencer.promised).toBe(0);
  });
});
