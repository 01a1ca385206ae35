import { setImmediate as nextTurn } from 'node:timers/promises';
import { openRunScopes, runScope, stepScope, type StepRunner } from '../../lib/workflow/run.scope';

const runner: StepRunner = { step: async (_name, fn) => fn({} as never) as never };

describe('run scope bookkeeping', () => {
  it('counts a scope open until the promise its code returned settles, then closes it', async () => {
    let finish!: () => void;
    const body = runScope.run(runner, () => new Promise<void>((resolve) => (finish = resolve)));
    expect(openRunScopes()).toBe(1);
    finish();
    await body;
    await nextTurn();
    expect(openRunScopes()).toBe(0);
  });

  it('closes a scope whose code threw, or returned a value', () => {
    expect(() =>
      runScope.run(runner, () => {
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(runScope.run(runner, () => 7)).toBe(7);
    expect(openRunScopes()).toBe(0);
  });

  it('disables the storage once every scope closed: code scheduled inside one no longer sees it', async () => {
    let seen: { early?: StepRunner; late?: StepRunner } = {};
    let late!: Promise<void>;
    void runScope.run(runner, () => {
      late = new Promise<void>((resolve) => setTimeout(resolve, 20)).then(() => void (seen.late = runScope.getStore()));
      return Promise.resolve().then(() => void (seen.early = runScope.getStore()));
    });
    await late;
    // Seen while the scope was open; gone once it closed (the storage disabled), though the
    // continuation was created inside it.
    expect(seen.early).toBe(runner);
    expect(seen.late).toBeUndefined();

    // Opened again, it works as before.
    seen = {};
    await runScope.run(runner, async () => {
      await nextTurn();
      seen.early = runScope.getStore();
    });
    expect(seen.early).toBe(runner);
  });

  it('keeps the storage while a step scope is open inside a closed run scope', async () => {
    let finish!: () => void;
    let inside: unknown;
    runScope.run(runner, () => {
      void stepScope.run({ runner, context: {} as never }, async () => {
        await new Promise<void>((resolve) => (finish = resolve));
        inside = stepScope.getStore()?.runner;
      });
    });
    await nextTurn();
    await nextTurn();
    expect(openRunScopes()).toBe(1);
    finish();
    await nextTurn();
    expect(inside).toBe(runner);
  });
});
