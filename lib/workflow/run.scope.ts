import { AsyncLocalStorage } from 'node:async_hooks';

/** What `@Step` methods need from the run they are called in. */
export interface StepRunner {
  step<T>(name: string, fn: () => Promise<T> | T): Promise<T>;
}

/**
 * The run a piece of code executes in. `@Step` methods look it up here, so they memoize inside a
 * run and simply execute outside one (e.g. in a unit test).
 */
export const runScope = new AsyncLocalStorage<StepRunner>();
