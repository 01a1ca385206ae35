import 'reflect-metadata';
import { Inject, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import Redis from 'ioredis';
import { QueueModule, RunEvents } from '../../lib';
import { EFFECT_NS, EFFECT_REDIS, EFFECT_STEP_MS, EffectWorkflow, effectKeys } from './effect.workflow';

/**
 * A Sluice worker on a Redis Cluster in its own OS process, forked by the cluster fault tests
 * (see cluster-worker.ts). It runs EffectWorkflow and records on the plain server (EFFECT_URL)
 * every step execution and every 'completed', 'failed' and 'stalled' event of this process.
 *
 * env: SEEDS (JSON `[{ host, port }, …]`), NS, EFFECT_URL, CONCURRENCY, LOCK_MS,
 * STALLED_INTERVAL_MS, STEP_MS, REDIS_TIMEOUT_MS (optional).
 * IPC out: { ready: true } after init; { stopped: true } before exiting 0 on 'stop'.
 * IPC in: 'stop' closes the app (as a deployed app's shutdown would) and exits 0.
 */
const seeds = JSON.parse(required('SEEDS')) as Array<{ host: string; port: number }>;
const ns = required('NS');
const effectUrl = required('EFFECT_URL');

/** Records this process's run events on the plain server (after the commit, for 'completed'). */
@Injectable()
class EventRecorder {
  constructor(events: RunEvents, @Inject(EFFECT_REDIS) redis: Redis) {
    const keys = effectKeys(ns);
    events.on('completed', (event) => {
      void redis
        .multi()
        .hincrby(keys.commits, event.runId, 1)
        .rpush(keys.commitLog, `${event.runId} ${event.attempt} ${Date.now()} ${process.pid}`)
        .exec();
    });
    events.on(
      'failed',
      (event) =>
        void redis.rpush(
          keys.otherLog,
          `failed ${event.runId} ${event.attempt} ${Date.now()} ${event.error.name}:${event.error.message.slice(0, 200).replace(/\s+/g, '_')}`,
        ),
    );
    events.on(
      'stalled',
      (event) => void redis.rpush(keys.otherLog, `stalled ${event.runId} ${event.stalls} ${Date.now()} requeued=${event.requeued}`),
    );
  }
}

async function main(): Promise<void> {
  const redis = new Redis(effectUrl);
  @Module({
    imports: [
      QueueModule.forRoot({
        connection: { cluster: seeds },
        namespace: ns,
        worker: {
          concurrency: Number(process.env.CONCURRENCY ?? 20),
          ...(process.env.LOCK_MS && { lockMs: Number(process.env.LOCK_MS) }),
          ...(process.env.STALLED_INTERVAL_MS && { stalledIntervalMs: Number(process.env.STALLED_INTERVAL_MS) }),
        },
        ...(process.env.REDIS_TIMEOUT_MS && { redisTimeoutMs: Number(process.env.REDIS_TIMEOUT_MS) }),
      }),
    ],
    providers: [
      EffectWorkflow,
      EventRecorder,
      { provide: EFFECT_REDIS, useValue: redis },
      { provide: EFFECT_NS, useValue: ns },
      { provide: EFFECT_STEP_MS, useValue: Number(process.env.STEP_MS ?? 0) },
    ],
  })
  class ChildModule {}

  const app = await NestFactory.createApplicationContext(ChildModule, {
    logger: process.env.SLUICE_TEST_LOGS ? ['log', 'warn', 'error'] : ['error'],
  });
  process.on('message', (message) => {
    if (message !== 'stop') return;
    void app
      .close()
      .then(() => redis.quit())
      .then(
        () => process.send!({ stopped: true }, () => process.exit(0)),
        (error: Error) => {
          console.error(`cluster worker ${process.pid} failed to stop: ${error.stack}`);
          process.exit(1);
        },
      );
  });
  // The test process went away: do not linger as an orphan.
  process.on('disconnect', () => process.exit(2));
  process.send?.({ ready: true });
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`cluster-worker.process: ${name} is not set`);
  return value;
}

main().catch((error: Error) => {
  console.error(`cluster worker ${process.pid} failed: ${error.stack}`);
  process.exit(1);
});
