/**
 * Cleanups that must run however the benchmark ends: the caller awaits the returned function in
 * its `finally` (a normal end or a failure), and SIGINT (Ctrl-C), SIGTERM and SIGHUP run every
 * cleanup still pending before the process exits. Only a SIGKILL of the benchmark skips them; its
 * forked workers then still exit (their IPC channel closes) but redis-servers it started remain.
 */
const pending = new Set<() => Promise<void>>();
const EXIT_CODES: Partial<Record<NodeJS.Signals, number>> = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 };
/** A cleanup that hangs must not keep a Ctrl-C from ending the process. */
const SIGNAL_CLEANUP_MS = 15_000;
let installed = false;
let stopping = false;

/** True once a signal started the teardown: loops stop starting runs (the process exits when the cleanups are done). */
export const isStopping = () => stopping;

/** Registers `cleanup`; the returned function runs it at most once (later calls wait for the same run) and never throws. */
export function onTeardown(cleanup: () => Promise<unknown>): () => Promise<void> {
  install();
  let ran: Promise<void> | undefined;
  const once = () => {
    pending.delete(once);
    return (ran ??= cleanup().then(
      () => undefined,
      (error) => console.error(`bench teardown: ${(error as Error).message}`),
    ));
  };
  pending.add(once);
  return once;
}

function install(): void {
  if (installed) return;
  installed = true;
  for (const signal of Object.keys(EXIT_CODES) as NodeJS.Signals[]) {
    process.on(signal, () => {
      if (stopping) return; // a second Ctrl-C while cleaning up: the hard timer below still ends it
      stopping = true;
      console.error(`\n${signal}: stopping the benchmark's servers and workers…`);
      const hard = setTimeout(() => process.exit(EXIT_CODES[signal]), SIGNAL_CLEANUP_MS);
      // One after the other, newest first: workers before the servers they use.
      const all = [...pending].reverse().reduce((chain, cleanup) => chain.then(cleanup), Promise.resolve());
      void all.finally(() => {
        clearTimeout(hard);
        process.exit(EXIT_CODES[signal]);
      });
    });
  }
}
