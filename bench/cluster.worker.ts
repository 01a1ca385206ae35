/**
 * One worker process of the cluster scenario, forked by worker.pool.ts and reused across runs.
 * Per run: `fill` enqueues `jobs` echo runs into its namespace (untimed, as in drain-c50), `go`
 * starts a Sluice worker at concurrency 50 and reports `done` once all of them are committed,
 * with the CPU this process spent on it; then it closes the worker and reports `closed`.
 */
import type { QueueModuleOptions } from '../lib';
import { QueueClient } from '../lib';
import { benchModule, CompletionCounter, EchoWorkflow, start } from './sluice.system';

export type ToWorker = { type: 'fill'; connection: QueueModuleOptions['connection']; namespace: string; jobs: number } | { type: 'go' };
export type FromWorker =
  { type: 'filled' } | { type: 'done'; bootMs: number; cpuMicros: number } | { type: 'closed' } | { type: 'failed'; error: string };

const send = (message: FromWorker) => new Promise<void>((resolve) => process.send!(message, undefined, {}, () => resolve()));

/** Messages are queued as they arrive, so none is lost while a run is busy. */
const inbox: ToWorker[] = [];
let waiting: ((message: ToWorker) => void) | undefined;
process.on('message', (message: ToWorker) => (waiting ? (waiting(message), (waiting = undefined)) : inbox.push(message)));

/** Resolves with the next message from the bench. */
const next = () => new Promise<ToWorker>((resolve) => (inbox.length ? resolve(inbox.shift()!) : (waiting = resolve)));

async function run(fill: Extract<ToWorker, { type: 'fill' }>): Promise<void> {
  const { connection, namespace, jobs } = fill;
  const producer = await start(benchModule(connection, namespace, [EchoWorkflow], { enabled: false }));
  const client = producer.get(QueueClient);
  for (let i = 0; i < jobs; i += 1_000) {
    await client.enqueueMany(
      EchoWorkflow,
      Array.from({ length: Math.min(1_000, jobs - i) }, (_, k) => ({ input: i + k })),
    );
  }
  await producer.close();
  await send({ type: 'filled' });
  if ((await next()).type !== 'go') throw new Error('expected go');

  const cpu = process.cpuUsage();
  const started = performance.now();
  const worker = await start(benchModule(connection, namespace, [EchoWorkflow], { enabled: true, concurrency: 50 }, jobs));
  const bootMs = performance.now() - started;
  await worker.get(CompletionCounter).done.promise;
  const used = process.cpuUsage(cpu);
  await send({ type: 'done', bootMs, cpuMicros: used.user + used.system });
  await worker.close();
  await send({ type: 'closed' });
}

async function main(): Promise<void> {
  // The bench is gone (even SIGKILLed): nothing left to report to.
  process.on('disconnect', () => process.exit(1));
  for (;;) {
    const message = await next();
    if (message.type !== 'fill') throw new Error(`expected fill, got ${message.type}`);
    await run(message);
  }
}

main().catch(async (error) => {
  await send({ type: 'failed', error: (error as Error).stack ?? String(error) }).catch(() => undefined);
  process.exit(1);
});
