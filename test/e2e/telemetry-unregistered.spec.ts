import { trace } from '@opentelemetry/api';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import type Redis from 'ioredis';
import { Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { commandsBefore, monitorCommands } from '../support/workflows';

/**
 * `@opentelemetry/api` comes with many packages, often with no SDK behind it: then every span and
 * instrument is a no-op, and a claim's telemetry extras (its trace context and queue wait, read
 * from the run record and shipped back) would be read for nothing. A worker asks for them per
 * call, only while its telemetry records. This file registers no SDK until it says so (the
 * telemetry spec registers one from the start).
 */
@Workflow('otel-unregistered.echo')
class EchoWorkflow {
  run(input: number): number {
    return input;
  }
}

let redis: Redis;
let app: TestApp;
let keys: RedisKeys;

beforeAll(async () => {
  redis = rawRedis();
  keys = new RedisKeys('sluice', uniqueNamespace('otel-unregistered'));
  app = await createApp([EchoWorkflow], { namespace: keys.namespace });
});

afterAll(async () => {
  await app?.close();
  await dropNamespace(redis, keys.namespace);
  redis.disconnect();
  trace.disable();
});

/**
 * Enqueues `count` runs in one call and awaits them; returns the fields each claim read from a
 * run's record (its HMGET naming 'attempts': the first of them goes to a parked worker as a
 * handoff, which reads no record, and a claim takes the others).
 */
async function claimReads(from: number, count: number): Promise<string[][]> {
  const monitor = await monitorCommands(keys.namespace);
  try {
    const handles = await app.client.enqueueMany(
      EchoWorkflow,
      Array.from({ length: count }, (_, i) => ({ input: from + i })),
    );
    await Promise.all(handles.map((handle) => handle.result({ timeoutMs: 10_000 })));
    const ids = new Set(handles.map((handle) => keys.run(handle.id)));
    const seen = await commandsBefore(monitor, redis, `${keys.base}sentinel`);
    return seen.filter((args) => args[0] === 'hmget' && ids.has(args[1]) && args.includes('attempts')).map((args) => args.slice(2));
  } finally {
    await monitor.close();
  }
}

it('claims read no telemetry fields while no SDK is registered, and read them once a tracer provider is', async () => {
  const before = await claimReads(0, 4);
  expect(before.length).toBeGreaterThanOrEqual(2);
  for (const fields of before) expect(fields).not.toContain('trace');

  trace.setGlobalTracerProvider(new BasicTracerProvider());
  const after = await claimReads(100, 4);
  expect(after.length).toBeGreaterThanOrEqual(2);
  for (const fields of after) expect(fields).toEqual(expect.arrayContaining(['trace', 'dueAt']));
});
