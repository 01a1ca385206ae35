import 'reflect-metadata';
import { Inject, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import Redis from 'ioredis';
import { QueueModule, RunEvents } from '../../lib';
import {
  CappedWorkflow,
  CHAOS_HOOKS,
  CHAOS_NS,
  CHAOS_REDIS,
  ChaosHooks,
  commitsKey,
  CronTickWorkflow,
  DrainWorkflow,
  SlotHolderWorkflow,
  StallWorkflow,
  ThreeStepWorkflow,
  ZombieWorkflow,
} from './chaos.workflows';
import { CONTROL_WORKFLOWS } from './control.workflows';

/**
 * A Sluice worker in its own OS process, forked by the chaos tests (see child-worker.ts).
 * env: REDIS_URL, NS, MODE ('drain' | 'stall' | 'capped'), CONCURRENCY, LOCK_MS, STALLED_INTERVAL_MS,
 * SHUTDOWN_TIMEOUT_MS, REDIS_TIMEOUT_MS, SHUTDOWN_HOOKS (SIGTERM closes the app, as in production).
 * IPC out: { ready: true } after init; drain: { claimed } on its first run; stall and capped
 * (CappedWorkflow, cap 1): { started } once the first step finished; { stopped: true, executed } before exiting 0 on 'stop'.
 * IPC in: 'go' releases drain runs held at their start; 'stop' closes the app and exits 0.
 * MODE 'three-step' (ThreeStepWorkflow): no hooks; every 'completed' event is counted in Redis
 * (commitsKey). MODE 'zombie' (ZombieWorkflow): { paused, where } at the pause its input asks
 * for, then waits for IPC 'resume'; { stepFailed, step, error } when a step throws.
 * MODE 'cron': CronTickWorkflow (its every-second schedule declared in code) and
 * SlotHolderWorkflow, whose runs hold their slots until IPC 'go'; { holding } per held run.
 * MODE 'control' (test/chaos/control.workflows.ts): { started } and { aborted, reason, at } of
 * ctl.hold runs; the other workflows record their starts in Redis.
 */
const url = required('REDIS_URL');
const ns = required('NS');
const mode = required('MODE');
const send = (message: object) => process.send?.(message);

let executed = 0;
let claimedSent = false;
let go!: () => void;
const gate = new Promise<void>((resolve) => (go = resolve));
let resume!: () => void;
const resumed = new Promise<void>((resolve) => (resume = resolve));

const hooks: ChaosHooks =
  mode === 'control'
    ? ({
        started: (runId: string) => send({ started: runId }),
        aborted: (runId: string, reason: unknown) => send({ aborted: runId, reason: (reason as Error)?.name, at: Date.now() }),
      } as ChaosHooks)
    : mode === 'three-step'
      ? {}
      : mode === 'zombie'
        ? {
            pause: (runId, where) => {
              send({ paused: runId, where });
              return resumed;
            },
            stepFailed: (runId, step, error) => send({ stepFailed: runId, step, error: (error as Error)?.name }),
          }
        : mode === 'cron'
          ? {
              beforeWork: (runId) => {
                send({ holding: runId });
                return gate;
              },
            }
          : mode === 'drain'
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

/** three-step: counts each 'completed' event (emitted after the commit) in Redis; registered before the worker starts. */
@Injectable()
class CommitCounter {
  constructor(events: RunEvents, @Inject(CHAOS_REDIS) redis: Redis, @Inject(CHAOS_NS) namespace: string) {
    events.on('completed', (event) => void redis.hincrby(commitsKey(namespace), event.runId, 1));
  }
}

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
          ...(process.env.SHUTDOWN_TIMEOUT_MS && { shutdownTimeoutMs: Number(process.env.SHUTDOWN_TIMEOUT_MS) }),
        },
        ...(process.env.REDIS_TIMEOUT_MS && { redisTimeoutMs: Number(process.env.REDIS_TIMEOUT_MS) }),
      }),
    ],
    providers: [
      ...(mode === 'control'
        ? CONTROL_WORKFLOWS
        : mode === 'cron'
          ? [CronTickWorkflow, SlotHolderWorkflow]
          : [
              mode === 'three-step'
                ? ThreeStepWorkflow
                : mode === 'zombie'
                  ? ZombieWorkflow
                  : mode === 'drain'
                    ? DrainWorkflow
                    : mode === 'capped'
                      ? CappedWorkflow
                      : StallWorkflow,
            ]),
      ...(mode === 'three-step' ? [CommitCounter] : []),
      { provide: CHAOS_REDIS, useValue: redis },
      { provide: CHAOS_NS, useValue: ns },
      { provide: CHAOS_HOOKS, useValue: hooks },
    ],
  })
  class ChildModule {}

  const app = await NestFactory.createApplicationContext(ChildModule, {
    logger: process.env.SLUICE_TEST_LOGS ? ['log', 'warn', 'error'] : ['error'],
  });
  // SHUTDOWN_HOOKS: SIGTERM closes the app the way a deployed Nest app does (then exits by the signal).
  if (process.env.SHUTDOWN_HOOKS) app.enableShutdownHooks();
  process.on('message', (message) => {
    if (message === 'go') go();
    if (message === 'resume') resume();
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
