/**
 * The process one system's runs are measured in, forked once per system by main.ts and reused
 * across its runs (see SystemProcesses). A system gets a process of its own so that what one
 * library changes in its process cannot tax another's runs: Sluice's `AsyncLocalStorage` (the
 * `@Step` run scope) turns on Node's promise hooks for every later promise of the process, which
 * made every peer measured after Sluice in the same process pay for them.
 */
import Redis from 'ioredis';
import type { ScenarioName } from './bench.types';
import { measure, RunResult } from './measure';
import { extraSluiceOptions } from './sluice.system';
import { systemNamed } from './systems';
import type { Failed } from './worker.pool';

export type ToSystem = {
  type: 'measure';
  system: string;
  scenario: ScenarioName;
  jobs: number;
  repeat: number;
  url: string;
  profileDir?: string;
  compactRecords: boolean;
};
export type FromSystem = { type: 'measured'; result: RunResult } | Failed;

const send = (message: FromSystem) => new Promise<void>((resolve) => process.send!(message, undefined, {}, () => resolve()));

let admin: Redis | undefined;

async function onMessage(message: ToSystem): Promise<void> {
  if (message.compactRecords) extraSluiceOptions.compactRunRecords = true;
  admin ??= new Redis(message.url);
  const result = await measure(
    systemNamed(message.system),
    message.scenario,
    message.jobs,
    message.repeat,
    message.url,
    admin,
    message.profileDir,
  );
  await send({ type: 'measured', result });
}

// The bench is gone (even SIGKILLed): nothing left to report to.
process.on('disconnect', () => process.exit(1));
// One run at a time: the bench sends the next only after this one's answer.
process.on('message', (message: ToSystem) => {
  void onMessage(message).catch(async (error) => {
    await send({ type: 'failed', error: (error as Error).stack ?? String(error) }).catch(() => undefined);
    process.exit(1);
  });
});
