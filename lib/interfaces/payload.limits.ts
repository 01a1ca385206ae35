/** Default bound on any encoded payload (input, step result, run result). */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;

/**
 * Default bound on one run's whole step memo (keys plus encoded results). The memo is shipped
 * with every claim of the run, so without a bound a step in a loop could grow every retry's
 * reply without limit.
 */
export const DEFAULT_MAX_MEMO_BYTES = 16 * 1024 * 1024;
