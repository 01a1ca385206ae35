import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import Redis from 'ioredis';
import { QueueModule } from '../../lib';
import { CappedWorkflow, CHAOS_HOOKS, CHAOS_NS, CHAOS_REDIS, ChaosHooks, DrainWorkflow, StallWorkflow } from './chaos.workflows';

/**
 * A Sluice worker in its own OS process, forked by the chaos tests (see child-worker.ts).
 * env: REDIS_URL, NS, MODE ('drain' | 'stall' | 'capped'), CONCURRENCY, LOCK_MS, STALLED_INTERVAL_MS.
 * IPC out: { ready: true } after init; drain: { claimed } on its first run; stall and capped
 * (CappedWorkflow, cap 1): { started } once the first step finished; { stopped: true, executed } before exiting 0 on 'stop'.
 * IPC in: 'go' releases drain runs held at their start; 'stop' closes the app and exits 0.
 */
const url = required('REDIS_URL');
const ns = required('NS');
const mode = required('MODE');
const send = (message: object) => process.send?.(message);

let executed = 0;
let claimedSent = false;
let go!: () => void;
const gate = new Promise<void>((resolve) => (go = resolve));

const hooks: ChaosHooks =
  mode === 'drain'
    ? {
        beforeWork: async (runId) => {
          if (!claimedSent) {
            claimedSent = true;
            send({ claimed: runId });
          }
          await gate;
        },
        counted: () => void executed++,
      }
    : {
        afterFirstStep: (runId) => {
          send({ started: runId });
          return new Promise<void>(() => undefined); // blocks until the test kills this process
        },
      };

async function main(): Promise<void> {
  const redis = new Redis(url);
  @Module({
    imports: [
      QueueModule.forRoot({
        connection: { url },
        namespace: ns,
        worker: {
          concurrency: Number(process.env.CONCURRENCY ?? 20),
          ...(process.env.LOCK_MS && { lockMs: Number(process.env.LOCK_MS) }),
          ...(process.env.STALLED_INTERVAL_MS && { stalledIntervalMs: Number(process.env.STALLED_INTERVAL_MS) }),
        },
      }),
    ],
    providers: [
      mode === 'drain' ? DrainWorkflow : mode === 'capped' ? CappedWorkflow : StallWorkflow,
      { provide: CHAOS_REDIS, useValue: redis },
      { provide: CHAOS_NS, useValue: ns },
      { provide: CHAOS_HOOKS, useValue: hooks },
    ],
  })
  class ChildModule {}

  const app = await NestFactory.createApplicationContext(ChildModule, {
    logger: process.env.SLUICE_TEST_LOGS ? ['log', 'warn', 'error'] : ['error'],
  });
  process.on('message', (message) => {
    if (message === 'go') go();
    if (message === 'stop') {
      void app
        .close()
        .then(() => redis.quit())
        .then(
          () => process.send!({ stopped: true, executed }, () => process.exit(0)),
          (error: Error) => {
            console.error(`worker ${process.pid} failed to stop: ${error.stack}`);
            process.exit(1);
          },
        );
    }
  });
  // The test process went away: do not linger as an orphan.
  process.on('disconnect', () => process.exit(2));
  send({ ready: true });
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`worker.process: ${name} is not set`);
  return value;
}

main().catch((error: Error) => {
  console.error(`worker ${process.pid} failed: ${error.stack}`);
  process.exit(1);
});
