/**
 * Any error class, as an expected-error column in a test table: what jest's `toThrow` and
 * `rejects.toThrow` accept as a constructor, without the unsafe `Function` type.
 */
export type ErrorClass = abstract new (...args: never) => unknown;
