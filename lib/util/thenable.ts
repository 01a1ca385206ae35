/** Whether `value` is a promise or promise-like (has a `then` method): what to await, or chain on. */
export function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as PromiseLike<T> | null)?.then === 'function';
}
