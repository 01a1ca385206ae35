import { Logger } from '@nestjs/common';
import { LeaseLostError, LeaseUnconfirmedError } from '../../lib/errors';
import { LazyAbort } from '../../lib/execution/lazy.abort';
import type { LuaScripts } from '../../lib/redis/lua.scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { type ActiveRun, ActiveRuns } from '../../lib/worker/active-runs';
import { LeaseHeartbeat } from '../../lib/worker/lease.heartbeat';

/**
 * The heartbeat's stop of attempts whose lease it could not renew (Redis unreachable), on a fake
 * clock, with the extend call's outcome set by the test (the Redis side of a beat is covered in
 * regressions-worker.spec; a worker cut off from Redis end to end in chaos/lease-unconfirmed.spec).
 */
describe('LeaseHeartbeat while its beats fail', () => {
  const LOCK_MS = 3_000;
  /** A lease counts as held for its length less a tenth after its last renewal was sent. */
  const HOLDS_MS = 2_700;

  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000 });
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
  });
  afterEach(() => {
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  function setUp() {
    const redis = { reachable: true };
    const scripts = {
      run: async () => {
        if (!redis.reachable) throw new Error('Redis unreachable');
        return []; // no lease lost
      },
    } as unknown as LuaScripts;
    const active = new ActiveRuns();
    const heartbeat = new LeaseHeartbeat(scripts, new RedisKeys('sluice', 'unit'), active, LOCK_MS);
    const claim = (id: string): ActiveRun => {
      const run = { id, token: `token-${id}`, abort: new LazyAbort(), leaseConfirmedAt: Date.now() };
      active.add(run);
      return run;
    };
    return { heartbeat, claim, redis };
  }

  it('stops an attempt once no beat renewed its lease for its length less a tenth, not before', async () => {
    const { heartbeat, claim, redis } = setUp();
    const a = claim('a');
    jest.advanceTimersByTime(1_000);
    await heartbeat.beat(); // renewed: its lease holds from here
    const renewedAt = Date.now();
    redis.reachable = false;
    jest.advanceTimersByTime(1_000);
    await heartbeat.beat();
    const b = claim('b'); // claimed during the outage (a reply that came just before it)
    jest.advanceTimersByTime(renewedAt + HOLDS_MS - 1 - Date.now());
    expect(a.abort.aborted).toBe(false);
    jest.advanceTimersByTime(1);
    expect(a.abort.reason).toBeInstanceOf(LeaseUnconfirmedError);
    expect(a.abort.reason).toBeInstanceOf(LeaseLostError); // whatever treats a lost lease treats this one alike
    expect((a.abort.reason as Error).message).toBe(
      'Lease on run a could not be renewed for 3000 ms (Redis unreachable); the attempt stops before another worker may take the run over',
    );
    // The later claim has its own time: stopped at its own deadline, by the timer set again.
    expect(b.abort.aborted).toBe(false);
    jest.advanceTimersByTime(b.leaseConfirmedAt + HOLDS_MS - 1 - Date.now());
    expect(b.abort.aborted).toBe(false);
    jest.advanceTimersByTime(1);
    expect(b.abort.reason).toBeInstanceOf(LeaseUnconfirmedError);
  });

  it('stops nothing once a beat reaches Redis again, and sets no timer while beats succeed', async () => {
    const { heartbeat, claim, redis } = setUp();
    const a = claim('a');
    redis.reachable = false;
    jest.advanceTimersByTime(1_000);
    await heartbeat.beat();
    expect(jest.getTimerCount()).toBe(1); // the stop, set by the failed beat
    redis.reachable = true;
    jest.advanceTimersByTime(1_000);
    await heartbeat.beat();
    expect(jest.getTimerCount()).toBe(0);
    jest.advanceTimersByTime(LOCK_MS * 3);
    expect(a.abort.aborted).toBe(false);
  });

  it('leaves an attempt aborted for another reason as it is', async () => {
    const { heartbeat, claim, redis } = setUp();
    const a = claim('a');
    const cancelled = new Error('cancelled');
    a.abort.abort(cancelled);
    redis.reachable = false;
    await heartbeat.beat();
    jest.advanceTimersByTime(LOCK_MS);
    expect(a.abort.reason).toBe(cancelled);
  });
});
