import { AsyncLocalStorage } from 'node:async_hooks';
import { isThenable } from '../util/thenable';
import type { Stored } from './payload.types';
import type { StepCallOptions, StepContext, StepFn } from './step.options';
import { needsRunScope } from './step-classes.registry';

/** What `@Step` methods need from the run they are called in. */
export interface StepRunner {
  /**
   * Runs `fn` as the step `name` of this run: memoized at the top level of the run, plainly when
   * called from inside another step's `fn` (see {@link stepScope}), under `options` (time limit,
   * tries) at the top level only.
   */
  step<T>(name: string, fn: StepFn<T>, options?: StepCallOptions): Promise<Stored<T>>;
}

/** What {@link stepScope} holds while a step's `fn` executes: its runner, and the context its `fn` got (a nested step's `fn` gets the same). */
export interface StepFrame {
  runner: StepRunner;
  context: StepContext;
}

/** One of the two scopes below: an AsyncLocalStorage's `run` and `getStore`. */
export interface Scope<S> {
  run<R, A extends unknown[]>(store: S, fn: (...args: A) => R, ...args: A): R;
  getStore(): S | undefined;
}

/** What the storage holds inside a step's `fn`: the run's runner (for `@Step`) and the step's frame. */
class InStep {
  constructor(
    readonly runner: StepRunner | undefined,
    readonly frame: StepFrame,
  ) {}
}

/**
 * Both scopes below live in one AsyncLocalStorage: in Node 20 every promise created anywhere in
 * the process copies every enabled storage's value (a promise hook per storage), so two storages
 * cost each promise twice what one does. At the top level of a run it holds the runner itself,
 * inside a step's `fn` an {@link InStep}.
 */
const storage = new AsyncLocalStorage<StepRunner | InStep>();

/**
 * The run a piece of code executes in. `@Step` methods look it up here, so they memoize inside a
 * run and simply execute outside one (e.g. in a unit test).
 */
export const runScope: Scope<StepRunner> = {
  run: (runner, fn, ...args) => runOpen(runner, fn, args),
  getStore: () => {
    const store = storage.getStore();
    return store instanceof InStep ? store.runner : store;
  },
};

/** Scopes entered (runs' attempts and steps' functions) whose code has not settled yet. */
let scopesOpen = 0;
let disableQueued = false;

/**
 * Runs `fn` in the storage holding `store`, counted open until what it returns settles. When the
 * last one settles, the storage is disabled (on the next turn of the event loop, if none opened
 * meanwhile): in Node 20 that turns the promise hooks off again, so a run that needs no scope (and
 * every other promise of the process) stops paying for them; the next `run` turns them back on.
 */
function runOpen<S extends StepRunner | InStep, R, A extends unknown[]>(store: S, fn: (...args: A) => R, args: A): R {
  scopesOpen++;
  let result: R;
  try {
    result = storage.run(store, fn, ...args);
  } catch (error) {
    closeOne();
    throw error;
  }
  if (isThenable(result)) Promise.resolve(result).then(closeOne, closeOne);
  else closeOne();
  return result;
}

function closeOne(): void {
  if (--scopesOpen > 0 || disableQueued) return;
  disableQueued = true;
  setImmediate(disableIfIdle);
}

function disableIfIdle(): void {
  disableQueued = false;
  if (scopesOpen === 0) storage.disable();
}

/** Scopes open now, for tests: a run that needs none leaves it at 0. */
export function openRunScopes(): number {
  return scopesOpen;
}

/**
 * Calls `fn(instance, b, c)` inside `runner`'s {@link runScope} when the run needs it (see
 * needsRunScope); otherwise plainly. Why: an AsyncLocalStorage in use turns on Node 20's promise
 * hooks for every promise of the process (about a fifth of a drain's throughput at concurrency
 * 50, in bench), and only `@Step` methods read the scope. Classes are defined when their module
 * loads, before the application starts, so a run sees every `@Step` method its code can call; a
 * class first loaded while a run executes (a dynamic `import()` inside it) has its steps memoized
 * from the run's next attempt on.
 */
export function inRunScope<I extends object, B, C, T>(runner: StepRunner, fn: (instance: I, b: B, c: C) => T, instance: I, b: B, c: C): T {
  // Arguments rather than a closure: this runs once per attempt.
  return needsRunScope(instance) ? runScope.run(runner, fn, instance, b, c) : fn(instance, b, c);
}

/**
 * Set, to the runner that owns the step, for as long as a step's `fn` executes. A step called
 * inside it — through `@Step`, which goes through {@link runScope}, or through `ctx.step`, which
 * calls the runner directly — sees it and runs plainly as part of its parent: were it numbered
 * and memoized, a retry that replays the parent from the memo would skip it, and every later
 * step of the same name would shift onto the wrong memo entry. It is a separate scope from
 * `runScope` (in the same storage) because sibling steps started in parallel at the top level
 * (`Promise.all`) share the run's context and must each stay a top-level, memoized step; only
 * code *inside* a step's `fn` inherits this one.
 */
export const stepScope: Scope<StepFrame> = {
  // Inside the step, @Step methods still find the run's runner (which then runs them plainly).
  run: (frame, fn, ...args) => runOpen(new InStep(runScope.getStore(), frame), fn, args),
  getStore: () => {
    const store = storage.getStore();
    return store instanceof InStep ? store.frame : undefined;
  },
};
