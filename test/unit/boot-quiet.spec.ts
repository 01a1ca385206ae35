import { setImmediate as afterThisTurn } from 'node:timers/promises';
import { ActiveRuns } from '../../lib/worker/active-runs';
import { BOOT_QUIET_MAX_MS, BootQuiet } from '../../lib/worker/boot.quiet';
import type { LazyAbort } from '../../lib/execution/lazy.abort';

/** When a worker's boot stops holding back its idle-time connections (see BootQuiet). */
describe('BootQuiet', () => {
  const run = (id: string) => ({ id, token: `${id}-t`, abort: {} as LazyAbort, leaseConfirmedAt: Date.now() });
  const settled = async (quiet: BootQuiet) => {
    let over = false;
    void quiet.over.then(() => (over = true));
    for (let i = 0; i < 3; i++) await afterThisTurn();
    return over && quiet.isOver;
  };

  it('is over at once when the first reserve claimed nothing (or failed)', async () => {
    const quiet = new BootQuiet();
    quiet.claimed(0, new ActiveRuns());
    expect(await settled(quiet)).toBe(true);
  });

  it('holds while the claimed runs are in flight, and ends the turn after the last is done', async () => {
    const active = new ActiveRuns();
    const [a, b] = [run('a'), run('b')];
    active.add(a);
    active.add(b);
    const quiet = new BootQuiet(60_000); // no bound in sight: only the runs end it
    quiet.claimed(2, active);
    expect(await settled(quiet)).toBe(false);
    active.delete(a.id, a.token);
    expect(await settled(quiet)).toBe(false);
    active.delete(b.id, b.token);
    expect(await settled(quiet)).toBe(true);
  });

  it(`ends at its bound (by default ${BOOT_QUIET_MAX_MS} ms) after the claim however long the runs take, and at once at end()`, async () => {
    const active = new ActiveRuns();
    active.add(run('long'));
    const bounded = new BootQuiet(20);
    const claimedAt = Date.now();
    bounded.claimed(1, active);
    await bounded.over;
    expect(Date.now() - claimedAt).toBeGreaterThanOrEqual(19);
    const stopped = new BootQuiet(60_000);
    stopped.claimed(1, active);
    stopped.end();
    expect(await settled(stopped)).toBe(true);
  });
});
