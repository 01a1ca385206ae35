/**
 * What the step recorder tells the telemetry of its attempt (see lib/telemetry/run.telemetry.ts).
 * Only top-level steps reach it: a step nested in another is part of its parent.
 */
export interface StepObserver {
  /** The step `key` (`name#occurrence`) returned its memoized result without executing. */
  replayed(name: string, key: string): void;
  /** Executes the step (`execute`: its function, then its durable write) and returns what it returns. */
  executed<T>(name: string, key: string, execute: () => Promise<T>): Promise<T>;
}
