/**
 * Where a worker's first claim spends its time: the first-claim scenario's loop (a producer app
 * stays up; each sample enqueues a run, bootstraps a worker app and waits for the run's result) on
 * a private redis-server, with a timestamp at each phase of the boot, printed as the median over
 * the samples (the first few, JIT-cold, left out), with the Node CPU time and the socket writes
 * of a sample.
 *
 * `npx ts-node --transpile-only bench/first-claim.phases.ts [--samples 60]`
 *
 * The phases are taken by wrapping methods of Sluice's classes and ioredis's connect: a probe for
 * finding what a boot waits on, not a benchmark (bench/main.ts measures; MONITOR, as in
 * command.trace.ts, shows the commands).
 */
import { performance } from 'node:perf_hooks';
import { Socket } from 'node:net';
import Redis from 'ioredis';
import { QueueClient } from '../lib';
import { LayoutMigrator } from '../lib/migration/layout.migrator';
import { MigrationRunner } from '../lib/migration/migration.runner';
import { LuaScripts } from '../lib/redis/lua.scripts';
import { RedisServerCheck } from '../lib/redis/redis-server.check';
import { RunExecutor } from '../lib/worker/run.executor';
import { WorkerOrchestrator } from '../lib/worker/worker.orchestrator';
import { startRedisServer } from '../test/support/redis-server';
import { benchModule, EchoWorkflow, NAMESPACE, start } from './sluice.system';

type Method = (...args: unknown[]) => unknown;

/** Set while a sample runs: its start. */
let startedAt = 0;
let marks: Array<[string, number]> = [];
const mark = (name: string) => startedAt && marks.push([name, performance.now() - startedAt]);

/** Marks `label >` when `proto[method]` is called and `label <` when it (or its promise) ends. */
function around(proto: object, method: string, label = method): void {
  const target = proto as Record<string, Method>;
  const original = target[method];
  target[method] = function (this: unknown, ...args: unknown[]) {
    mark(`${label} >`);
    const out = original.apply(this, args);
    if (out instanceof Promise)
      out.then(
        () => mark(`${label} <`),
        () => mark(`${label} failed`),
      );
    else mark(`${label} <`);
    return out;
  };
}

around(MigrationRunner.prototype, 'onApplicationBootstrap', 'bootstrap hooks');
around(RedisServerCheck.prototype, 'ensure', 'server check');
around(LayoutMigrator.prototype, 'migrate', 'migration');
around(WorkerOrchestrator.prototype, 'declare', 'declarations');
around(WorkerOrchestrator.prototype, 'startWorking', 'worker start');
around(RunExecutor.prototype, 'execute', 'run executed');
// Each script call, by name (declare-limits, reserve, complete, watch…).
const run = LuaScripts.prototype.run as unknown as Method;
(LuaScripts.prototype as unknown as Record<string, Method>).run = function (this: unknown, ...args: unknown[]) {
  const name = String(args[0]);
  mark(`${name} >`);
  const out = run.apply(this, args) as Promise<unknown>;
  out.then(
    () => mark(`${name} <`),
    () => mark(`${name} failed`),
  );
  return out;
};
// Each connection of the sample, numbered in the order they open (the command connection first):
// asked to connect, then TCP connected.
let opened = 0;
const connect = (Redis.prototype as unknown as Record<string, Method>).connect;
(Redis.prototype as unknown as Record<string, Method>).connect = function (this: Redis, ...args: unknown[]) {
  const id = `connection ${++opened}`;
  mark(`${id}: connect`);
  this.once('connect', () => mark(`${id}: TCP connected`));
  return connect.apply(this, args);
};
let writes = 0;
const writeGeneric = (Socket.prototype as unknown as Record<string, Method>)._writeGeneric;
(Socket.prototype as unknown as Record<string, Method>)._writeGeneric = function (this: unknown, ...args: unknown[]) {
  if (startedAt) writes++;
  return writeGeneric.apply(this, args);
};

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const samples = Number(argv.includes('--samples') ? argv[argv.indexOf('--samples') + 1] : 60);
  const cold = 5;
  const server = await startRedisServer();
  const producer = await start(benchModule({ url: server.url }, NAMESPACE, [EchoWorkflow], { enabled: false }));
  const client = producer.get(QueueClient);
  const phases = new Map<string, number[]>();
  const totals: number[] = [];
  const cpu: number[] = [];
  const writesPer: number[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      const handle = await client.enqueue(EchoWorkflow, i);
      marks = [];
      writes = 0;
      opened = 0;
      const cpuBefore = process.cpuUsage();
      startedAt = performance.now();
      const result = handle.result(); // as the bench's first-claim scenario waits
      const worker = await start(benchModule({ url: server.url }, NAMESPACE, [EchoWorkflow], { enabled: true }));
      mark('app created');
      await result;
      mark('result');
      const used = process.cpuUsage(cpuBefore);
      startedAt = 0;
      if (i >= cold) {
        totals.push(marks[marks.length - 1][1]);
        cpu.push((used.user + used.system) / 1000);
        writesPer.push(writes);
        const seen = new Set<string>();
        for (const [name, at] of marks) {
          if (seen.has(name)) continue; // the first of each (a later reserve belongs to the next wait)
          seen.add(name);
          (phases.get(name) ?? phases.set(name, []).get(name)!).push(at);
        }
      }
      await worker.close();
    }
  } finally {
    await producer.close();
    await server.stop();
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1];
  const measured = samples - cold;
  console.log(`first claim, ${measured} samples (after ${cold} left out), median ms from the start of the worker app's bootstrap:`);
  const rows = [...phases].map(([name, at]) => ({ name, at: median(at), count: at.length })).sort((a, b) => a.at - b.at);
  for (const { name, at, count } of rows)
    console.log(`${at.toFixed(2).padStart(8)}  ${name}${count < measured ? ` (in ${count} samples)` : ''}`);
  console.log(
    `median ${median(totals).toFixed(2)} ms to the result; Node CPU ${median(cpu).toFixed(2)} ms; ${median(writesPer)} socket writes (all connections, the producer's too)`,
  );
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
