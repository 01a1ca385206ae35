/**
 * The error `call` rejects with. Fails the test if it resolves, or throws synchronously instead of
 * returning a rejected promise (an async API must never throw at the call site).
 */
export async function rejection(call: () => Promise<unknown>): Promise<unknown> {
  let promise: Promise<unknown>;
  try {
    promise = call();
  } catch (error) {
    throw new Error(`threw synchronously instead of rejecting: ${String(error)}`);
  }
  return promise.then(
    (value) => {
      throw new Error(`resolved instead of rejecting: ${JSON.stringify(value)}`);
    },
    (error: unknown) => error,
  );
}
