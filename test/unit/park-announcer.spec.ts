import type { LuaScripts } from '../../lib/redis/lua.scripts';
import type { RedisLink } from '../../lib/redis/redis.link';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { ParkAnnouncer } from '../../lib/worker/park.announcer';

/**
 * What a worker believes about its park entry. A complete call's announcement is only believed
 * if nothing changed the entry between the call's sending and its reply: a reserve sent
 * meanwhile runs after the complete call on the same connection and drops the entry. (The
 * Redis side of these calls is covered end to end in fast-path.spec and chaos/park-race.spec;
 * here only the bookkeeping, with the park script's calls recorded instead of sent.)
 */
describe('ParkAnnouncer', () => {
  const BLOCK_MS = 5_000;
  function announcer() {
    const parkCalls: unknown[][] = [];
    const scripts = { run: async (...args: unknown[]) => void parkCalls.push(args) } as unknown as LuaScripts;
    return {
      park: new ParkAnnouncer(
        scripts,
        undefined as unknown as RedisLink,
        new RedisKeys('sluice', 'unit'),
        ['wf'],
        'worker-1',
        30_000,
        BLOCK_MS,
      ),
      parkCalls,
    };
  }

  it('believes a complete call that announced the park when nothing changed since it was sent', () => {
    const { park } = announcer();
    const sent = park.forShortClaim();
    expect(sent).toMatchObject({ entry: park.entry, ttlMs: BLOCK_MS + 1_000 });
    expect(park.announcedByCommit(sent!)).toBe(true);
    expect(park.holdsFor(BLOCK_MS)).toBe(true);
    expect(park.forShortClaim()).toBeUndefined(); // announced: the next complete call need not
  });

  it("a complete call's park spares one reserve: taken once, and ended by any later change of the entry", async () => {
    const { park } = announcer();
    park.announcedByCommit(park.forShortClaim()!);
    expect(park.takeCommitPark()).toBe(true);
    expect(park.takeCommitPark()).toBe(false);
    park.cleared();
    park.announcedByCommit(park.forShortClaim()!);
    park.cleared(); // a reserve, or a pop of the wake lists (a marker must bring a reserve)
    expect(park.takeCommitPark()).toBe(false);
    park.announcedByCommit(park.forShortClaim()!);
    await park.announce(200);
    expect(park.takeCommitPark()).toBe(false);
  });

  it('does not believe it once a reserve was sent after it (that reserve dropped the entry)', () => {
    const { park } = announcer();
    const sent = park.forShortClaim()!;
    park.cleared(); // the reserve call, sent before the complete call's reply came
    expect(park.announcedByCommit(sent)).toBe(false);
    expect(park.holdsFor(BLOCK_MS)).toBe(false); // so the next block announces again
  });

  it('does not believe it once a park call was sent after it (that call made the entry that counts)', async () => {
    const { park, parkCalls } = announcer();
    const sent = park.forShortClaim()!;
    await park.announce(200);
    expect(parkCalls).toHaveLength(1);
    expect(park.announcedByCommit(sent)).toBe(false);
    expect(park.holdsFor(BLOCK_MS)).toBe(false); // the shorter park call's validity stands
  });
  it('a deferral (after a handoff) is ended by the announcement that comes, or by its own timer only', async () => {
    const { park } = announcer();
    const first = park.defer();
    expect(park.deferring).toBe(true);
    const sent = park.forShortClaim(); // the handed-over run's complete call carries the announcement
    expect(sent).toBeDefined();
    expect(park.announcedByCommit(sent!)).toBe(true);
    expect(park.deferring).toBe(false);
    expect(park.endDeferral(first)).toBe(false); // that run's timer, later: nothing left to end

    park.cleared(); // the next handoff took the entry
    const second = park.defer();
    expect(park.endDeferral(first)).toBe(false); // an earlier handoff's timer does not end this one
    expect(park.deferring).toBe(true);
    expect(park.endDeferral(second)).toBe(true); // its own does: the worker announces itself
    expect(park.deferring).toBe(false);

    park.defer();
    expect(park.endDeferral()).toBe(true); // a complete call that claimed runs instead ends any
    park.defer();
    await park.announce(200);
    expect(park.deferring).toBe(false);
    park.defer();
    park.cleared(); // a marker popped: the reserve that follows announces at the next block
    expect(park.deferring).toBe(false);
  });
});
